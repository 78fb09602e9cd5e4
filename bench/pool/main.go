// Command pool compares the two ways seed 004 and seed 002 give work to
// child instances: N real jobs (/bin/true) split between C child
// instances (flux batch -N1 jobs of a C-broker instance), pulled from a
// pool of the parent (flux pool submit, then flux pool pull as each
// child's initial program) or pushed as a command file per child (flux
// capacitor --wait). Runs alternate; the time from the first child's
// submission until every child has ended is printed for each, and the
// pool/capacitor ratio of each pair, and the load average after it.
//
// With -profile DIR, each run writes CPU profiles (go tool pprof reads
// them) of the parent's rank 0 broker (RUN.parent.cpu), each child's
// broker (RUN.childI.cpu) and each child's flux pool pull or flux
// capacitor process (RUN.childI.cli.cpu), RUN being pool-N or
// capacitor-N.
//
//	go run ./bench/pool -flux bin/flux [-n 10000] [-children 2] [-runs 2] [-window 0] [-profile DIR]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "profile" {
		// the scripts' helper: bench profile start PATH | stop
		if err := profileRPC(os.Args[2:]); err != nil {
			fatal(err)
		}
		return
	}
	bin := flag.String("flux", "bin/flux", "flux binary")
	n := flag.Int("n", 10000, "jobs in all")
	children := flag.Int("children", 2, "child instances (one broker each)")
	runs := flag.Int("runs", 2, "alternating pairs")
	window := flag.Int("window", 0, "flux pool pull --window (0: its default)")
	profile := flag.String("profile", "", "write CPU profiles of the brokers and pullers to `DIR`")
	flag.Parse()
	if *n < *children || *children < 1 || *runs < 1 || *window < 0 {
		fatal(fmt.Errorf("want -n >= -children >= 1, -runs >= 1, -window >= 0"))
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	dir, err := os.MkdirTemp("", "bench-pool-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := writeScripts(dir, *n, *children, *window); err != nil {
		fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	if *profile != "" {
		if *profile, err = filepath.Abs(*profile); err == nil {
			err = os.MkdirAll(*profile, 0o755)
		}
		if err != nil {
			fatal(err)
		}
	}
	prof := func(run string) []string {
		if *profile == "" {
			return nil
		}
		return []string{"PROF=" + filepath.Join(*profile, run), "BENCH=" + self}
	}
	fmt.Printf("pool: %d /bin/true jobs through %d child instances of a %d-broker instance\n", *n, *children, *children)
	var ratios []float64
	for i := 1; i <= *runs; i++ {
		p, err := run(abs, *children, filepath.Join(dir, "pool.sh"), prof(fmt.Sprintf("pool-%d", i)))
		if err != nil {
			fatal(fmt.Errorf("pool run %d: %w", i, err))
		}
		c, err := run(abs, *children, filepath.Join(dir, "capacitor.sh"), prof(fmt.Sprintf("capacitor-%d", i)))
		if err != nil {
			fatal(fmt.Errorf("capacitor run %d: %w", i, err))
		}
		ratios = append(ratios, p/c)
		fmt.Printf("pair %d: flux pool %.2f s (%.0f jobs/s), flux capacitor %.2f s (%.0f jobs/s): pool/capacitor %.2f (load average %s)\n",
			i, p, float64(*n)/p, c, float64(*n)/c, p/c, benchkit.LoadAvg())
	}
	sort.Float64s(ratios)
	fmt.Printf("median pool/capacitor time: %.2f (target <= 1.20)\n", ratios[len(ratios)/2])
	if *profile != "" {
		printProfiles(*profile)
	}
}

// writeScripts writes the two initial programs: each prints "secs T0 T1",
// when the first child was submitted and when the last one had ended.
func writeScripts(dir string, n, children, window int) error {
	per := make([]int, children)
	for i := range n {
		per[i%children]++
	}
	// each child runs its program through child.sh, which profiles the
	// child's broker (and a puller) when $PROF is set
	child := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(child, []byte(childScript), 0o755); err != nil {
		return err
	}
	var capa strings.Builder
	capa.WriteString("set -e\n" + profStart + "t0=$(date +%s.%N)\nids=\n")
	for i, k := range per {
		f := filepath.Join(dir, "part"+strconv.Itoa(i)+".cmds")
		if err := os.WriteFile(f, []byte(strings.Repeat("true\n", k)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&capa, "ids=\"$ids $(flux batch --flags=waitable -N1 --wrap sh %s %d - flux capacitor --wait --quiet --command-file %s)\"\n", child, i, f)
	}
	capa.WriteString(waitAll)
	pullOpt := ""
	if window > 0 {
		pullOpt = " --window=" + strconv.Itoa(window)
	}
	var pool strings.Builder
	fmt.Fprintf(&pool, "set -e\nflux pool submit -p bench --cc=1-%[1]d --quiet true\nflux pool close -p bench\n%[2]st0=$(date +%%s.%%N)\nids=\n", n, profStart)
	for i := range children {
		fmt.Fprintf(&pool, "ids=\"$ids $(flux batch --flags=waitable -N1 --wrap sh %s %d cli flux pool pull%s -p bench)\"\n", child, i, pullOpt)
	}
	pool.WriteString(waitAll)
	// every item must have been run and reported once
	fmt.Fprintf(&pool, "test \"$(flux pool list -p bench | grep -c ' done ')\" -eq %d || { echo 'not every pool item is done' >&2; exit 1; }\n", n)
	if err := os.WriteFile(filepath.Join(dir, "capacitor.sh"), []byte(capa.String()), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "pool.sh"), []byte(pool.String()), 0o755)
}

const waitAll = `for id in $ids; do flux job wait $id; done
echo secs $t0 $(date +%s.%N)
test -z "$PROF" || "$BENCH" profile stop
`

// profStart starts the parent broker's profile (see -profile).
const profStart = `test -z "$PROF" || "$BENCH" profile start "$PROF.parent.cpu"
`

// childScript runs a child's program (sh child.sh I cli|- PROGRAM...),
// profiling the child's broker and, with cli, the program itself.
const childScript = `i=$1 cli=$2
shift 2
if test -n "$PROF"; then
	"$BENCH" profile start "$PROF.child$i.cpu" || exit 1
	test "$cli" != cli || export FLUXGO_CPUPROFILE="$PROF.child$i.cli.cpu"
fi
"$@"
rc=$?
unset FLUXGO_CPUPROFILE
test -z "$PROF" || "$BENCH" profile stop
exit $rc
`

// profileRPC is the scripts' helper: "start PATH" starts a CPU profile
// of the broker at $FLUX_URI written to PATH (it runs until "stop" or
// 15 minutes), "stop" ends it.
func profileRPC(args []string) error {
	h, err := flux.Open(os.Getenv("FLUX_URI"))
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch {
	case len(args) == 2 && args[0] == "start":
		// answered only when the profile stops: sent, not waited for
		if _, err := h.RPC("broker.profile", 0, map[string]any{"name": "cpu", "path": args[1], "duration": 900}, 0); err != nil {
			return err
		}
		// a request that reached the broker: the next one is behind it
		return h.Call(ctx, "broker.ping", 0, map[string]any{}, nil)
	case len(args) == 1 && args[0] == "stop":
		return h.Call(ctx, "broker.profile", 0, map[string]any{"name": "cpu-stop"}, nil)
	}
	return fmt.Errorf("profile: want start PATH or stop, got %q", args)
}

// printProfiles lists the profiles written.
func printProfiles(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.cpu"))
	sort.Strings(files)
	fmt.Printf("CPU profiles (go tool pprof -top FILE): %d in %s\n", len(files), dir)
}

func run(bin string, size int, script string, env []string) (float64, error) {
	cmd := exec.Command(bin, "start", "-s", strconv.Itoa(size), "sh", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "secs" {
			t0, err0 := strconv.ParseFloat(f[1], 64)
			t1, err1 := strconv.ParseFloat(f[2], 64)
			if err0 != nil || err1 != nil {
				break
			}
			return t1 - t0, nil
		}
	}
	return 0, fmt.Errorf("no time in the output: %s", out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "pool:", err)
	os.Exit(1)
}
