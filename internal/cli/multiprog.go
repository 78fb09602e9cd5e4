package cli

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// flux multi-prog CONFIG: multiple program, multiple data. Each task of
// a job runs "flux multi-prog CONFIG", which picks the line of CONFIG
// whose task idset holds FLUX_TASK_RANK (or the "*" line) and execs its
// command, with %t replaced by the task rank and %o by the task's offset
// within the line's idset. Lines are split as a shell would ("#" starts
// a comment).

// mpLine is one CONFIG line.
type mpLine struct {
	lineno int
	ranks  idset.Set
	any    bool // "*": every task no other line names
	argv   []string
}

func parseMultiProg(text string) ([]mpLine, error) {
	var out []mpLine
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	n := 0
	seen := idset.Set{}
	wild := false
	for sc.Scan() {
		n++
		words, err := splitDirective(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(words) == 0 {
			continue
		}
		if len(words) < 2 {
			return nil, fmt.Errorf("line %d: a task idset and a command are needed", n)
		}
		l := mpLine{lineno: n, argv: words[1:]}
		if words[0] == "*" {
			if wild {
				return nil, fmt.Errorf("line %d: a second \"*\" line", n)
			}
			wild, l.any = true, true
		} else {
			if l.ranks, err = idset.Parse(words[0]); err != nil {
				return nil, fmt.Errorf("line %d: task idset %q: %w", n, words[0], err)
			}
			for r := range l.ranks.All() {
				if seen.Contains(r) {
					return nil, fmt.Errorf("line %d: task %d is already on another line", n, r)
				}
				seen.Add(r)
			}
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// multiProgArgv returns the command task rank runs, substituted.
func multiProgArgv(lines []mpLine, rank uint) ([]string, error) {
	var pick *mpLine
	offset := 0
	for i := range lines {
		l := &lines[i]
		if !l.any && l.ranks.Contains(rank) {
			pick = l
			for r := range l.ranks.All() {
				if r == rank {
					break
				}
				offset++
			}
			break
		}
	}
	if pick == nil {
		for i := range lines {
			if lines[i].any {
				pick = &lines[i]
				offset = int(rank) // "*": the offset among all tasks
			}
		}
	}
	if pick == nil {
		return nil, fmt.Errorf("no command for task %d", rank)
	}
	argv := make([]string, len(pick.argv))
	t, o := strconv.FormatUint(uint64(rank), 10), strconv.Itoa(offset)
	for i, a := range pick.argv {
		argv[i] = strings.NewReplacer("%t", t, "%o", o).Replace(a)
	}
	return argv, nil
}

func newMultiProgCmd() *cobra.Command {
	var dryRun string
	cmd := &cobra.Command{
		Use:   "multi-prog [-n RANKS] CONFIG",
		Short: "Run a different program for each task of a job (MPMD), from CONFIG",
		Long: `Used as a job's command (flux run -N4 flux multi-prog app.conf): each
task runs the command of the CONFIG line whose task idset holds its rank
(FLUX_TASK_RANK), or of the "*" line for tasks no line names. In a
command, %t is the task rank and %o the task's offset within the line's
idset. Lines are split as a shell would; "#" starts a comment. A task may
be on one line only. --dry-run=RANKS prints what tasks RANKS would run.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			lines, err := parseMultiProg(string(text))
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if dryRun != "" {
				ranks, err := idset.Parse(dryRun)
				if err != nil {
					return fmt.Errorf("--dry-run=%s: %w", dryRun, err)
				}
				for r := range ranks.All() {
					argv, err := multiProgArgv(lines, r)
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%d: %s\n", r, strings.Join(argv, " "))
				}
				return nil
			}
			s := os.Getenv("FLUX_TASK_RANK")
			rank, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return fmt.Errorf("FLUX_TASK_RANK=%q: not running as a task of a Flux job", s)
			}
			argv, err := multiProgArgv(lines, uint(rank))
			if err != nil {
				return err
			}
			path, err := exec.LookPath(argv[0])
			if err != nil {
				return err
			}
			return syscall.Exec(path, argv, os.Environ())
		},
	}
	cmd.Flags().StringVarP(&dryRun, "dry-run", "n", "", "Print what tasks `RANKS` would run instead of running")
	return cmd
}
