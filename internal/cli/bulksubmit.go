package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

func newBulksubmitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bulksubmit [OPTIONS...] COMMAND [ARGS...] [::: INPUTS...]",
		Short: "Submit many jobs: COMMAND once per input, like GNU parallel",
		Long: `Submit one job per input: COMMAND and OPTIONS with each "{}" replaced by the
input (and "{0}", "{1}" ... by the fields of an input split on --sep;
"{seq}" / "{seq1}" by the input number from 0 / 1; "{.%}", "{./}",
"{./%}", "{.//}" by the input without extension, its base name, base name
without extension, directory). Inputs are the words after ":::" (several
":::" groups combine as a cartesian product, a ":::+" group is linked
instead: one of its words per combination, cycled; "::::" FILE reads lines
of FILE), or the lines of standard input when none are given. Jobs are
submitted in one stream, as fast as the instance accepts them, and their
ids printed in input order.`,
		// options are parsed per input, after substitution
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runBulksubmit(args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if errors.Is(err, pflag.ErrHelp) {
				return cmd.Help()
			}
			return err
		},
	}
	var bf bulkFlags
	addSubmitFlags(cmd.Flags(), &submitOptions{}, submitFlagSets{perTask: true, bulk: true})
	addBulkFlags(cmd.Flags(), &bf)
	return cmd
}

// bulkFlags are the options of bulksubmit alone.
type bulkFlags struct {
	sep     string
	shuffle bool
}

func addBulkFlags(fs *pflag.FlagSet, bf *bulkFlags) {
	fs.StringVar(&bf.sep, "sep", " ", "split each input into fields {0}, {1}... on `SEP`")
	fs.BoolVar(&bf.shuffle, "shuffle", false, "Submit the jobs in random order (replacement fields keep their input's values)")
}

// bulkOptions parses bulksubmit's options (everything before the
// command) and returns them with the remaining arguments.
func bulkOptions(args []string) (o *submitOptions, bf bulkFlags, rest []string, err error) {
	o = &submitOptions{cmdName: "bulksubmit", proc: defaultProcessEnv()}
	fs := pflag.NewFlagSet("bulksubmit", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SetOutput(io.Discard)
	addSubmitFlags(fs, o, submitFlagSets{perTask: true, bulk: true})
	addBulkFlags(fs, &bf)
	if err := fs.Parse(args); err != nil {
		return nil, bf, nil, err
	}
	return o, bf, fs.Args(), nil
}

// isBulkDelim reports whether an argument starts an input group.
func isBulkDelim(a string) bool {
	return a == ":::" || a == ":::+" || a == "::::" || a == "::::+"
}

// bulkInputs splits args into the command template and its inputs.
func bulkInputs(args []string, stdin io.Reader) (tmpl []string, inputs [][]string, err error) {
	var groups [][]string
	var linked []bool // group i is linked to the combinations before it
	i := 0
	for i < len(args) && !isBulkDelim(args[i]) {
		i++
	}
	tmpl = args[:i]
	for i < len(args) {
		switch delim := args[i]; delim {
		case ":::", ":::+":
			var g []string
			i++
			for i < len(args) && !isBulkDelim(args[i]) {
				g = append(g, args[i])
				i++
			}
			groups = append(groups, g)
			linked = append(linked, delim == ":::+")
		case "::::", "::::+":
			i++
			if i >= len(args) {
				return nil, nil, fmt.Errorf("%s needs a file name", delim)
			}
			var lines []string
			var err error
			if args[i] == "-" {
				lines, err = scanLines(stdin)
			} else {
				lines, err = readLines(args[i])
			}
			if err != nil {
				return nil, nil, err
			}
			groups = append(groups, lines)
			linked = append(linked, delim == "::::+")
			i++
		}
	}
	if len(tmpl) == 0 {
		return nil, nil, fmt.Errorf("job command is missing")
	}
	if len(groups) == 0 {
		g, err := scanLines(stdin)
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, g)
		linked = append(linked, false)
	}
	inputs = [][]string{{}}
	for k, g := range groups {
		var next [][]string
		if linked[k] && k > 0 && len(g) > 0 {
			// one word of a linked group per combination, cycling
			for n, prefix := range inputs {
				next = append(next, append(append([]string(nil), prefix...), g[n%len(g)]))
			}
			inputs = next
			continue
		}
		for _, prefix := range inputs {
			for _, v := range g {
				next = append(next, append(append([]string(nil), prefix...), v))
			}
		}
		inputs = next
	}
	return tmpl, inputs, nil
}

func scanLines(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var g []string
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			g = append(g, line)
		}
	}
	return g, sc.Err()
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// bulkField matches the replacement fields of a template word: {},
// {N}, {seq}, {seq1}, and the path attributes {.%} {./} {./%} {.//}
// (optionally indexed: {N./}).
var bulkField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{(seq1?|\d*)(\.%|\./%|\.//|\./)?\}`) })

// substituteBulk replaces the fields in each template word for input
// number seq.
func substituteBulk(tmpl []string, input []string, sep string, seq int) []string {
	all := strings.Join(input, " ")
	var fields []string
	for _, in := range input {
		fields = append(fields, strings.Split(in, sep)...)
	}
	out := make([]string, len(tmpl))
	for i, w := range tmpl {
		out[i] = bulkField().ReplaceAllStringFunc(w, func(f string) string {
			m := bulkField().FindStringSubmatch(f)
			v := all
			switch m[1] {
			case "seq":
				return strconv.Itoa(seq)
			case "seq1":
				return strconv.Itoa(seq + 1)
			case "":
			default:
				k, _ := strconv.Atoi(m[1])
				if k >= len(fields) {
					return f
				}
				v = fields[k]
			}
			switch m[2] {
			case ".%":
				v = strings.TrimSuffix(v, filepath.Ext(v))
			case "./":
				v = filepath.Base(v)
			case "./%":
				v = filepath.Base(v)
				v = strings.TrimSuffix(v, filepath.Ext(v))
			case ".//":
				v = filepath.Dir(v)
			}
			return v
		})
	}
	return out
}

func runBulksubmit(args []string, stdin io.Reader, out, errw io.Writer) error {
	o, bf, rest, err := bulkOptions(args)
	if err != nil {
		return err
	}
	sep := bf.sep
	// the options are substituted too: parse them again per input when
	// they have replacement fields
	opts := args[:len(args)-len(rest)]
	perInput := false
	for _, a := range opts {
		perInput = perInput || bulkField().MatchString(a)
	}
	tmpl, inputs, err := bulkInputs(rest, stdin)
	if err != nil {
		return err
	}
	specs := make([]*jobspec.Jobspec, 0, len(inputs))
	var dry []string
	for seq, in := range inputs {
		oi, optsi := o, opts
		if perInput {
			optsi = substituteBulk(opts, in, sep, seq)
			if oi, _, _, err = bulkOptions(optsi); err != nil {
				return fmt.Errorf("input %q: %w", strings.Join(in, " "), err)
			}
		}
		command := substituteBulk(tmpl, in, sep, seq)
		if o.dryRun {
			dry = append(dry, strings.Join(append(dryRunOptions(optsi), command...), " "))
			continue
		}
		js, err := oi.buildOne(command)
		if err != nil {
			return fmt.Errorf("input %q: %w", strings.Join(in, " "), err)
		}
		specs = append(specs, js)
	}
	if bf.shuffle {
		rand.Shuffle(len(specs), func(i, k int) { specs[i], specs[k] = specs[k], specs[i] })
		rand.Shuffle(len(dry), func(i, k int) { dry[i], dry[k] = dry[k], dry[i] })
	}
	if o.dryRun {
		for _, line := range dry {
			fmt.Fprintf(out, "bulksubmit: submit %s\n", line)
		}
		return nil
	}
	return submitSpecs(o, specs, true, out, errw)
}

func newJobSubmitCmd() *cobra.Command {
	var urgencyStr string
	var flagList []string
	cmd := &cobra.Command{
		Use:   "submit [--urgency=N] [--flags=F] [JOBSPEC-FILE]",
		Short: "Submit a jobspec (JSON or YAML) from a file or standard input",
		Args:  cobra.MaximumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			if len(args) == 0 || args[0] == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			js, err := jobspec.Parse(data)
			if err != nil {
				return err
			}
			urg, err := urgencyValue(urgencyStr)
			if err != nil {
				return fmt.Errorf("--urgency: %w", err)
			}
			flags, err := flagsValue(flagList)
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				b, _ := json.Marshal(js)
				var resp struct {
					ID jobid.ID `json:"id"`
				}
				req := map[string]any{"J": sign.Wrap(b, uint32(os.Getuid())), "urgency": urg, "flags": flags}
				if err := h.Call(ctx, "job-ingest.submit", 0xffffffff, req, &resp); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), resp.ID.String())
				return nil
			})
		}),
	}
	cmd.Flags().StringVarP(&urgencyStr, "urgency", "u", "16", "job urgency 0-31")
	cmd.Flags().StringSliceVarP(&flagList, "flags", "f", nil, "submit flags: debug, waitable, novalidate")
	return cmd
}

// dryRunOptions drops --dry-run from the options a dry run shows.
func dryRunOptions(opts []string) []string {
	var out []string
	for _, a := range opts {
		if a != "--dry-run" && a != "--shuffle" { // bulksubmit's, not the job's
			out = append(out, a)
		}
	}
	return out
}
