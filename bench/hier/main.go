// Command hier runs N one-core test jobs (simulated, 1 ms each: the
// framework's cost, not fork's) through a depth-2 hierarchy of instances
// and through one flat instance, and prints the time, the rate and, per
// level (parent, each child, each grandchild), the jobs each instance
// ran, its broker's peak RSS (VmHWM) and CPU, and the CPU of the program
// that fed it (flux capacitor or flux pool pull).
//
// Shapes (-shapes, run in turn, -runs times alternating):
//
//   - capacitor: seed 004's hierarchical flux capacitor. The parent
//     (flux start -s C) runs C children (flux batch -N1), each child runs
//     G grandchildren (flux batch -n1), and each grandchild runs
//     flux capacitor --wait on its share of the N job lines.
//   - pool: seed 002's pull. The parent puts the N jobs in a pool (flux
//     pool submit, timed), the same tree of instances is made, and each
//     grandchild runs flux pool pull from the pool.
//   - flat: one instance (flux start -s 1) running flux capacitor --wait
//     on all N lines.
//
// The grandchildren (and the flat instance) have a fake inventory of
// -nodes × -cores (as bench/throughput's), so the jobs' simulated cores
// never bound the rate. Progress lines come every -progress while it
// runs; peak RSS above -rss-limit is flagged.
//
//	go run ./bench/hier -flux bin/flux [-n 1000000] [-children 2] [-grand 2] [-shapes capacitor,pool,flat] [-runs 1]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "register", "report":
			// the scripts' helpers (see helper.go)
			if err := helper(os.Args[1], os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "hier:", err)
				os.Exit(1)
			}
			return
		}
	}
	bin := flag.String("flux", "bin/flux", "flux binary")
	n := flag.Int("n", 1000000, "jobs in all")
	children := flag.Int("children", 2, "child instances of the parent (one broker each)")
	grand := flag.Int("grand", 2, "grandchildren per child (one core and broker each; a child has its node's cores)")
	shapes := flag.String("shapes", "capacitor,pool,flat", "shapes to run, comma-separated: capacitor, pool, flat")
	runs := flag.Int("runs", 1, "rounds of the shapes, alternating")
	nodes := flag.Int("nodes", 256, "fake nodes of each job-running instance")
	cores := flag.Int("cores", 64, "cores per fake node")
	runDur := flag.String("run", "0.001s", "test executor run duration of each job (FSD)")
	progress := flag.Duration("progress", 10*time.Second, "print progress this often")
	rssLimit := flag.Int("rss-limit", 500, "flag instances whose peak RSS passes `MB`")
	active := flag.Int("active", 10000, "flux capacitor --active: jobs each capacitor keeps unfinished (0: no bound)")
	profile := flag.String("profile", "", "write each instance's broker heap profile, as its work ends, to `DIR`/NAME.heap (go tool pprof)")
	keep := flag.Bool("keep", false, "keep the scripts' directory (outputs of the batch jobs)")
	var extra confList
	flag.Var(&extra, "conf", "configuration of each job-running instance (the leaves and the flat one): a dotted KEY=VALUE, valid as TOML and as flux batch --conf (repeatable), e.g. job-manager.inactive-num-limit=20000")
	flag.Parse()
	if *active < 0 {
		fatal(fmt.Errorf("-active: want >= 0"))
	}
	if *n < 1 || *children < 1 || *grand < 1 || *runs < 1 || *nodes < 1 || *cores < 1 {
		fatal(fmt.Errorf("want -n, -children, -grand, -runs, -nodes, -cores >= 1"))
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	var list []string
	for _, s := range strings.Split(*shapes, ",") {
		switch s = strings.TrimSpace(s); s {
		case "capacitor", "pool", "flat":
			list = append(list, s)
		default:
			fatal(fmt.Errorf("-shapes: unknown shape %q (capacitor, pool or flat)", s))
		}
	}
	cfg := &config{bin: abs, self: self, n: *n, children: *children, grand: *grand,
		nodes: *nodes, cores: *cores, run: *runDur, progress: *progress, rssLimitKB: *rssLimit * 1024,
		keep: *keep, conf: extra, active: *active}
	if *profile != "" {
		if cfg.profile, err = filepath.Abs(*profile); err == nil {
			err = os.MkdirAll(cfg.profile, 0o755)
		}
		if err != nil {
			fatal(err)
		}
	}
	fmt.Printf("hier: %d test jobs of %s; hierarchy: 1 parent of %d brokers -> %d children -> %d grandchildren each (%d leaves of %d×%d fake cores); flat: 1 instance of %d×%d\n",
		cfg.n, cfg.run, cfg.children, cfg.children, cfg.grand, cfg.children*cfg.grand, cfg.nodes, cfg.cores, cfg.nodes, cfg.cores)
	fmt.Printf("capacitors keep at most %d jobs unfinished (--active; 0: no bound); pullers their default window\n", cfg.active)
	fmt.Printf("machine: %d CPUs, load average %s\n", numCPU(), loadAvg())
	times := map[string][]float64{}
	for r := 1; r <= *runs; r++ {
		for _, s := range list {
			res, err := cfg.runShape(s)
			if err != nil {
				fatal(fmt.Errorf("%s run %d: %w", s, r, err))
			}
			res.print(os.Stdout, cfg)
			times[s] = append(times[s], res.secs)
		}
	}
	if len(times) > 1 {
		printRatios(os.Stdout, list, times)
	}
}

// confList collects -conf values.
type confList []string

func (c *confList) String() string     { return strings.Join(*c, " ") }
func (c *confList) Set(v string) error { *c = append(*c, v); return nil }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "hier:", err)
	os.Exit(1)
}
