package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

type config struct {
	bin, self        string
	n                int
	children, grand  int
	nodes, cores     int
	run              string
	progress         time.Duration
	rssLimitKB       int
	keep             bool
	conf             []string
	active           int    // flux capacitor --active
	profile          string // heap profiles go here (-profile)
	dir              string // the scripts and command files (made once)
	leafFiles, whole []string
}

// result is one run of a shape.
type result struct {
	shape   string
	secs    float64 // first submission (or pool fill) until every job has ended
	fill    float64 // pool: the time flux pool submit took
	entries []entry // the instances' reports
	peakKB  map[string]int
	load    string
}

func numCPU() int             { return runtime.NumCPU() }
func loadAvg() string         { return benchkit.LoadAvg() }
func (c *config) leaves() int { return c.children * c.grand }

// share is how many of n jobs leaf i of k runs.
func share(n, k, i int) int {
	s := n / k
	if i < n%k {
		s++
	}
	return s
}

func (c *config) jobLine() string {
	return "--setattr=system.exec.test.run_duration=" + c.run + " true\n"
}

// prepare writes the scripts and command files once.
func (c *config) prepare() error {
	if c.dir != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "bench-hier-")
	if err != nil {
		return err
	}
	c.dir = dir
	line := c.jobLine()
	write := func(name string, k int) (string, error) {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return "", err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		for range k {
			w.WriteString(line)
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return "", err
		}
		return path, f.Close()
	}
	for i := range c.leaves() {
		p, err := write(fmt.Sprintf("leaf%d.cmds", i), share(c.n, c.leaves(), i))
		if err != nil {
			return err
		}
		c.leafFiles = append(c.leafFiles, p)
	}
	p, err := write("all.cmds", c.n)
	if err != nil {
		return err
	}
	c.whole = []string{p}
	for name, text := range map[string]string{
		"top.sh": c.topScript(), "child.sh": c.childScript(), "leaf.sh": fmt.Sprintf(leafScript, c.active),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// leafBrokerOpts are the options of a job-running instance's broker:
// the fake inventory, and any -conf.
func (c *config) leafBrokerOpts() []string {
	inv := fmt.Sprintf(`resource.config=[{"hosts":"node[0-%d]","cores":"0-%d"}]`, c.nodes-1, c.cores-1)
	return []string{"-S" + inv, "-Sresource.monitor-force-up=1"}
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// topScript is the parent's initial program: sh top.sh MODE.
func (c *config) topScript() string {
	var b strings.Builder
	b.WriteString(`set -e
mode=$1
cd "$HIER_DIR"
"$HIER" register parent parent
t0=$(date +%s.%N)
if test "$mode" = pool; then
`)
	// flux pool add takes at most 100,000 jobspecs a request
	for left := c.n; left > 0; left -= 100000 {
		fmt.Fprintf(&b, "\tflux pool submit -p bench --bcc=1-%d --quiet --setattr=system.exec.test.run_duration=%s true\n", min(left, 100000), c.run)
	}
	b.WriteString(`	flux pool close -p bench
	echo fill $t0 $(date +%s.%N) >fill
fi
ids=
`)
	for i := range c.children {
		fmt.Fprintf(&b, "ids=\"$ids $(flux batch --flags=waitable -N1 --output=child%d.out --wrap sh \"$HIER_DIR/child.sh\" %d $mode \"$FLUX_URI\")\"\n", i, i)
	}
	b.WriteString(`for id in $ids; do flux job wait $id; done
echo secs $t0 $(date +%s.%N) >secs
"$HIER" report parent parent
`)
	return b.String()
}

// childScript is a child's initial program: sh child.sh I MODE TOPURI.
func (c *config) childScript() string {
	var b strings.Builder
	b.WriteString(`set -e
i=$1 mode=$2 top=$3
cd "$HIER_DIR"
"$HIER" register child child$i
ids=
`)
	opts := ""
	for _, o := range c.leafBrokerOpts() {
		opts += " -B " + shq(o)
	}
	for _, cf := range c.conf {
		opts += " --conf " + shq(cf)
	}
	for j := range c.grand {
		fmt.Fprintf(&b, `leaf=$((i * %d + %d))
if test "$mode" = pool; then arg=$top; else arg="$HIER_DIR/leaf$leaf.cmds"; fi
ids="$ids $(flux batch --flags=waitable -n1 --output=leaf$leaf.out%s --wrap sh "$HIER_DIR/leaf.sh" leaf leaf$i.%d $mode "$arg")"
`, c.grand, j, opts, j)
	}
	b.WriteString(`for id in $ids; do flux job wait $id; done
"$HIER" report child child$i
`)
	return b.String()
}

// leafScript runs the jobs: sh leaf.sh LEVEL NAME MODE ARG (ARG: the
// command file, or the pool's instance).
const leafScript = `set -e
level=$1 name=$2 mode=$3 arg=$4
"$HIER" register $level $name
if test "$mode" = pool; then
	flux pool pull -p bench --parent="$arg"
else
	flux capacitor --wait --quiet --active=%d --command-file "$arg"
fi
"$HIER" report $level $name
`

// env is the instances' environment: small (every job's jobspec carries
// it), the same for every shape.
func (c *config) env() []string {
	env := []string{"HIER=" + c.self, "HIER_DIR=" + c.dir}
	if c.profile != "" {
		env = append(env, "HIER_PROFILE="+c.profile)
	}
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// runShape runs the n jobs in one shape and collects the instances'
// reports.
func (c *config) runShape(shape string) (*result, error) {
	if err := c.prepare(); err != nil {
		return nil, err
	}
	for _, f := range []string{"reg", "report", "secs", "fill"} {
		os.Remove(filepath.Join(c.dir, f))
	}
	var args []string
	switch shape {
	case "flat":
		args = append([]string{"start", "-s", "1"}, c.leafBrokerOpts()...)
		if len(c.conf) > 0 {
			cd := filepath.Join(c.dir, "flat-conf")
			if err := os.MkdirAll(cd, 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(cd, "bench.toml"), []byte(strings.Join(c.conf, "\n")+"\n"), 0o644); err != nil {
				return nil, err
			}
			args = append(args, "--config-path", cd)
		}
		args = append(args, "sh", "-c", `t0=$(date +%s.%N)
sh "$HIER_DIR/leaf.sh" flat flat capacitor "$1"
echo secs $t0 $(date +%s.%N) >"$HIER_DIR/secs"`, "flat", c.whole[0])
	default:
		args = []string{"start", "-s", strconv.Itoa(c.children), "sh", filepath.Join(c.dir, "top.sh"), shape}
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env()
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	res := &result{shape: shape, peakKB: map[string]int{}}
	fmt.Printf("-- %s: started (load average %s)\n", shape, loadAvg())
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.watch(shape, start, res, stop)
	}()
	// a hang guard only: 10 ms a job and 10 minutes
	guard := time.AfterFunc(time.Duration(c.n)*10*time.Millisecond+10*time.Minute, func() {
		fmt.Fprintf(os.Stderr, "hier: %s: not done after %v: killing it\n", shape, time.Since(start).Round(time.Second))
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	err := cmd.Wait()
	guard.Stop()
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("flux start: %w (outputs in %s)", err, c.dir)
	}
	res.load = loadAvg()
	if res.secs, err = readSpan(filepath.Join(c.dir, "secs"), "secs"); err != nil {
		return nil, err
	}
	if shape == "pool" {
		if res.fill, err = readSpan(filepath.Join(c.dir, "fill"), "fill"); err != nil {
			return nil, err
		}
	}
	res.entries = readEntries(filepath.Join(c.dir, "report"))
	ran := 0
	for _, e := range res.entries {
		if e.Level == "leaf" || e.Level == "flat" {
			ran += e.Jobs
		}
	}
	if ran != c.n {
		return res, fmt.Errorf("the job-running instances hold %d inactive jobs, not %d (outputs in %s)", ran, c.n, c.dir)
	}
	return res, nil
}

// readSpan reads "WORD T0 T1" from path: T1 - T0.
func readSpan(path, word string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("no %s file: %w", word, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 || f[0] != word {
		return 0, fmt.Errorf("%s: %q", path, b)
	}
	t0, err0 := strconv.ParseFloat(f[1], 64)
	t1, err1 := strconv.ParseFloat(f[2], 64)
	if err0 != nil || err1 != nil {
		return 0, fmt.Errorf("%s: %q", path, b)
	}
	return t1 - t0, nil
}

// watch prints a progress line every c.progress until stop: the jobs
// the job-running instances have finished, the rate, and the largest
// peak RSS so far; it also keeps every instance's peak RSS.
func (c *config) watch(shape string, start time.Time, res *result, stop <-chan struct{}) {
	handles := map[string]*flux.Handle{}
	defer func() {
		for _, h := range handles {
			h.Close()
		}
	}()
	tick := time.NewTicker(c.progress)
	defer tick.Stop()
	lastDone, lastT := 0, start
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		reported := map[string]entry{}
		for _, e := range readEntries(filepath.Join(c.dir, "report")) {
			reported[e.Name] = e
		}
		done := 0
		maxKB, maxName := 0, ""
		for _, e := range readEntries(filepath.Join(c.dir, "reg")) {
			if _, hwm := benchkit.ProcRSS(e.PID); hwm > res.peakKB[e.Name] {
				res.peakKB[e.Name] = hwm
			}
			if res.peakKB[e.Name] > maxKB {
				maxKB, maxName = res.peakKB[e.Name], e.Name
			}
			if e.Level != "leaf" && e.Level != "flat" {
				continue
			}
			if r, ok := reported[e.Name]; ok {
				done += r.Jobs
				continue
			}
			h := handles[e.Name]
			if h == nil {
				var err error
				if h, err = flux.Open(e.URI); err != nil {
					continue
				}
				handles[e.Name] = h
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var st jobStats
			if h.Call(ctx, "job-list.job-stats", flux.NodeidAny, map[string]any{}, &st) == nil {
				done += st.States.Inactive + st.Purged
			}
			cancel()
		}
		now := time.Now()
		el := now.Sub(start).Seconds()
		flag := ""
		if maxKB > c.rssLimitKB {
			flag = " OVER THE LIMIT"
		}
		fmt.Printf("   %s %6.0f s: %8d jobs done (%5.0f jobs/s since start, %5.0f in the last %v)  largest peak RSS %6.1f MB (%s)%s  load %s\n",
			shape, el, done, float64(done)/el, float64(done-lastDone)/now.Sub(lastT).Seconds(), c.progress,
			float64(maxKB)/1024, maxName, flag, loadAvg())
		lastDone, lastT = done, now
	}
}
