package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/internal/archivedb"
)

// Issue 25's target: with accounting and the priority plugin on, the
// job pipeline (bench/throughput) stays within 10% of its jobs/s
// without them. -throughput runs bench/throughput's workload in rounds
// of three, the order rotated each round:
//
//   - base: the default instance (a statedir, nothing configured);
//   - accounting: the same with mf-priority loaded and the submitting
//     user given an association in the
//     accounting database (-setup: a bank with a parent, a project, the
//     user with that default bank and project and running/active limits
//     that do not bind, then one fair-share pass), so every job takes
//     the enforcement path: job-ingest charges it to the default bank
//     and project, .accounting-limits counts it against its
//     association, mf-priority looks up the association's fair-share;
//   - +archive: accounting with an [archive] table too (the job archive
//     the usage and fair-share are computed from: each finished job
//     read back from job-list and job-info and written to SQLite).
//
// After each +archive run it reads the run's archive and checks that
// every job archived was charged to the default bank and project.

// throughputSetup is the -setup command of the accounting runs.
func throughputSetup(username string) string {
	return strings.Join([]string{
		"flux account add-bank root 1",
		"flux account add-bank --parent-bank=root physics 1",
		"flux account add-project climate",
		"flux account add-user --username=" + username + " --bank=physics --projects=climate --max-running-jobs=1000000 --max-active-jobs=1000000",
		"flux account update-usage >/dev/null",
	}, " && ")
}

const throughputConf = `[job-manager]
plugins = [ { load = "mf-priority" } ]
`

// archiveConf adds the job archive, from which the accounting module
// computes usage and fair-share.
const archiveConf = `
[archive]
`

// runFigures are what one bench/throughput run printed.
type runFigures struct {
	jobsPerSec float64
	brokerUS   float64 // broker CPU per job
}

var (
	throughputRE = regexp.MustCompile(`throughput\s+([0-9.]+) jobs/s`)
	brokerCPURE  = regexp.MustCompile(`CPU per job: broker\s+([0-9.]+) µs`)
)

func parseThroughput(out []byte) (runFigures, error) {
	var f runFigures
	m := throughputRE.FindSubmatch(out)
	c := brokerCPURE.FindSubmatch(out)
	if m == nil || c == nil {
		return f, fmt.Errorf("bench/throughput printed no throughput and broker CPU:\n%s", out)
	}
	f.jobsPerSec, _ = strconv.ParseFloat(string(m[1]), 64)
	f.brokerUS, _ = strconv.ParseFloat(string(c[1]), 64)
	return f, nil
}

func benchThroughput(fluxBin string, n, pairs int) error {
	if n < 1 || n > 1000000 || pairs < 1 || pairs > 100 {
		return fmt.Errorf("-n 1..1000000, -pairs 1..100")
	}
	bin, err := filepath.Abs(fluxBin)
	if err != nil {
		return err
	}
	me, err := user.Current()
	if err != nil {
		return fmt.Errorf("who runs the bench: %w", err)
	}
	dir, err := os.MkdirTemp("", "acctthroughput")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	driver := filepath.Join(dir, "throughput")
	if out, err := exec.Command("go", "build", "-o", driver, "./bench/throughput").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./bench/throughput (run from the repository's root): %v\n%s", err, out)
	}
	setup := throughputSetup(me.Username)
	variants := []variant{
		{name: "base"},
		{name: "accounting", conf: throughputConf, setup: setup},
		{name: "+archive", conf: throughputConf + archiveConf, setup: setup, archive: true},
	}
	for i := range variants {
		v := &variants[i]
		if v.conf == "" {
			continue
		}
		v.confDir = filepath.Join(dir, "conf"+strconv.Itoa(i))
		if err := os.Mkdir(v.confDir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(v.confDir, "accounting.toml"), []byte(v.conf), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("bench/throughput -n %d, %d rounds of base, accounting (mf-priority, user %s in bank physics, project climate) and accounting with [archive], in turn\n",
		n, pairs, me.Username)
	k := 0
	run := func(v variant) (runFigures, error) {
		k++
		state := filepath.Join(dir, fmt.Sprintf("state%d", k))
		args := []string{"-flux", bin, "-n", strconv.Itoa(n), "-S", "statedir=" + state}
		if v.confDir != "" {
			args = append(args, "-config-path", v.confDir, "-setup", v.setup)
		}
		out, err := exec.Command(driver, args...).CombinedOutput()
		if err != nil {
			return runFigures{}, fmt.Errorf("bench/throughput %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		f, err := parseThroughput(out)
		if err == nil && v.archive {
			err = checkCharged(filepath.Join(state, "job-archive.sqlite"), n)
		}
		os.RemoveAll(state)
		return f, err
	}
	ratios := make([][]float64, len(variants))
	cpuRatios := make([][]float64, len(variants))
	rates := make([][]float64, len(variants))
	for p := range pairs {
		load := benchkit.LoadAvg()
		// rotate which goes first, so none always meets the machine as
		// another left it
		figs := make([]runFigures, len(variants))
		for i := range variants {
			vi := (i + p) % len(variants)
			f, err := run(variants[vi])
			if err != nil {
				return err
			}
			figs[vi] = f
		}
		line := fmt.Sprintf("round %d: base %6.0f jobs/s (broker %5.1f µs/job)", p+1, figs[0].jobsPerSec, figs[0].brokerUS)
		rates[0] = append(rates[0], figs[0].jobsPerSec)
		for vi := 1; vi < len(variants); vi++ {
			r, cr := figs[vi].jobsPerSec/figs[0].jobsPerSec, figs[vi].brokerUS/figs[0].brokerUS
			ratios[vi], cpuRatios[vi] = append(ratios[vi], r), append(cpuRatios[vi], cr)
			rates[vi] = append(rates[vi], figs[vi].jobsPerSec)
			line += fmt.Sprintf(", %s %6.0f (%5.1f µs): ratio %.2f, CPU %.2f", variants[vi].name, figs[vi].jobsPerSec, figs[vi].brokerUS, r, cr)
		}
		fmt.Printf("%s  (load average before: %s)\n", line, load)
	}
	fmt.Printf("medians: base %.0f jobs/s", median(rates[0]))
	for vi := 1; vi < len(variants); vi++ {
		fmt.Printf("; %s %.0f jobs/s, ratio of medians %.2f, median ratio %.2f, median broker CPU ratio %.2f",
			variants[vi].name, median(rates[vi]), median(rates[vi])/median(rates[0]), median(ratios[vi]), median(cpuRatios[vi]))
	}
	fmt.Printf("  (load average now: %s)\n", benchkit.LoadAvg())
	return nil
}

// variant is one configuration bench/throughput runs.
type variant struct {
	name, conf, setup, confDir string
	archive                    bool // check the archive's charging afterwards
}

// checkCharged reads a run's archive: every job in it was charged to
// the default bank and project of the setup's association.
func checkCharged(path string, n int) error {
	db, err := archivedb.Open(path, true)
	if err != nil {
		return fmt.Errorf("the accounting run's archive: %w", err)
	}
	defer db.Close()
	var all, charged int
	err = db.QueryRowContext(context.Background(),
		`SELECT COUNT(*), COALESCE(SUM(bank = 'physics' AND project = 'climate'), 0) FROM jobs`).Scan(&all, &charged)
	if err != nil {
		return fmt.Errorf("the accounting run's archive: %w", err)
	}
	// (the archive may not hold all n: its pass at shutdown is bounded,
	// and the rest would be archived at the next start)
	if all == 0 || charged != all {
		return fmt.Errorf("the accounting run archived %d of its %d jobs, %d of them charged to bank physics and project climate; want all", all, n, charged)
	}
	fmt.Printf("        (accounting run: %d of %d jobs archived before it stopped, all charged to bank physics, project climate)\n", all, n)
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
