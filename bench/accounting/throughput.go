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
// without them. -throughput runs bench/throughput's workload in pairs,
// alternating:
//
//   - base: the default instance (a statedir, nothing configured);
//   - accounting: the same with mf-priority loaded and an [archive]
//     table, and the submitting user given an association in the
//     accounting database (-setup: a bank with a parent, a project, the
//     user with that default bank and project and running/active limits
//     that do not bind, then one fair-share pass), so every job takes
//     the enforcement path: job-ingest charges it to the default bank
//     and project, .accounting-limits counts it against its
//     association, mf-priority looks up the association's fair-share.
//
// After each accounting run it reads the run's archive and checks that
// every job was charged to the default bank and project.

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
	conf := filepath.Join(dir, "conf")
	if err := os.Mkdir(conf, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(conf, "accounting.toml"), []byte(throughputConf), 0o644); err != nil {
		return err
	}
	setup := throughputSetup(me.Username)
	fmt.Printf("bench/throughput -n %d, alternating base and accounting (mf-priority, [archive], user %s in bank physics, project climate), %d pairs\n",
		n, me.Username, pairs)
	run := func(k int, acct bool) (runFigures, error) {
		state := filepath.Join(dir, fmt.Sprintf("state%d", k))
		args := []string{"-flux", bin, "-n", strconv.Itoa(n), "-S", "statedir=" + state}
		if acct {
			args = append(args, "-config-path", conf, "-setup", setup)
		}
		out, err := exec.Command(driver, args...).CombinedOutput()
		if err != nil {
			return runFigures{}, fmt.Errorf("bench/throughput %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		f, err := parseThroughput(out)
		if err == nil && acct {
			err = checkCharged(filepath.Join(state, "job-archive.sqlite"), n)
		}
		os.RemoveAll(state)
		return f, err
	}
	var ratios, cpuRatios, bases, accts []float64
	for p := range pairs {
		load := benchkit.LoadAvg()
		// alternate which goes first, so neither always meets the
		// machine as the other left it
		order := []bool{false, true}
		if p%2 == 1 {
			order = []bool{true, false}
		}
		var base, acct runFigures
		for i, a := range order {
			f, err := run(2*p+i, a)
			if err != nil {
				return err
			}
			if a {
				acct = f
			} else {
				base = f
			}
		}
		r, cr := acct.jobsPerSec/base.jobsPerSec, acct.brokerUS/base.brokerUS
		ratios, cpuRatios = append(ratios, r), append(cpuRatios, cr)
		bases, accts = append(bases, base.jobsPerSec), append(accts, acct.jobsPerSec)
		fmt.Printf("pair %d: base %6.0f jobs/s (broker %5.1f µs/job), accounting %6.0f jobs/s (%5.1f µs/job): ratio %.2f, broker CPU ratio %.2f  (load average before: %s)\n",
			p+1, base.jobsPerSec, base.brokerUS, acct.jobsPerSec, acct.brokerUS, r, cr, load)
	}
	fmt.Printf("median: base %.0f jobs/s, accounting %.0f jobs/s (%.2f); median of the pair ratios %.2f, of the broker CPU ratios %.2f  (load average now: %s)\n",
		median(bases), median(accts), median(accts)/median(bases), median(ratios), median(cpuRatios), benchkit.LoadAvg())
	return nil
}

// checkCharged reads a run's archive: every one of its n jobs was
// charged to the default bank and project of the setup's association.
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
	if all != n || charged != n {
		return fmt.Errorf("the accounting run archived %d jobs, %d of them charged to bank physics and project climate; want %d of %d", all, charged, n, n)
	}
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
