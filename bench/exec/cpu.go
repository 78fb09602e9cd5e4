package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// cpuSplit is CPU time by who used it: the brokers themselves, the job
// shells themselves, the tasks (the shells' reaped children) and shells
// that exited during the run (reaped by their broker: self and tasks).
type cpuSplit struct {
	brokers, shells, tasks, exited time.Duration
}

func (c cpuSplit) total() time.Duration { return c.brokers + c.shells + c.tasks + c.exited }

func (c cpuSplit) sub(o cpuSplit) cpuSplit {
	return cpuSplit{c.brokers - o.brokers, c.shells - o.shells, c.tasks - o.tasks, c.exited - o.exited}
}

func (c cpuSplit) per(n int) cpuSplit {
	d := time.Duration(n)
	return cpuSplit{c.brokers / d, c.shells / d, c.tasks / d, c.exited / d}
}

// readSplit reads the CPU split of the brokers pids and the shells. A
// shell that starts during the run counts from zero.
func readSplit(brokers, shells []string) cpuSplit {
	var c cpuSplit
	for _, p := range brokers {
		self, kids := procTimes(p)
		c.brokers += self
		c.exited += kids
	}
	for _, p := range shells {
		self, kids := procTimes(p)
		c.shells += self
		c.tasks += kids
	}
	return c
}

// procTimes is a process's own utime+stime and its reaped children's.
func procTimes(pid string) (self, children time.Duration) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(i int) time.Duration {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(v) * 10 * time.Millisecond // USER_HZ = 100
	}
	return tick(11) + tick(12), tick(13) + tick(14)
}

// result is one throughput run's figures.
type result struct {
	jobs       float64       // jobs/s
	raw        float64       // fork+exec+wait /s, before and after averaged
	raw1, raw2 float64       // before, after
	fcpu       time.Duration // CPU per raw fork
	cpu        cpuSplit      // per job
}

func (r result) print(n, size int) {
	jcpu := r.cpu.total()
	fmt.Printf("fork+exec+wait /bin/true (raw, 2 in parallel)  %8.0f /s      (%.0f before, %.0f after)  CPU %.2f ms each\n", r.raw, r.raw1, r.raw2, ms(r.fcpu))
	fmt.Printf("real /bin/true jobs, %d on %d broker(s)     %8.0f jobs/s  CPU %.2f ms each (brokers + shells + tasks)\n", n, size, r.jobs, ms(jcpu))
	fmt.Printf("  CPU per job: brokers %.2f ms, shells %.2f ms, tasks %.2f ms, shells that exited %.2f ms\n",
		ms(r.cpu.brokers), ms(r.cpu.shells), ms(r.cpu.tasks), ms(r.cpu.exited))
	fmt.Printf("ratio jobs/raw                                 %8.1f %%      (target >= 50%%; by CPU cost %.1f %%)\n", 100*r.jobs/r.raw, 100*float64(r.fcpu)/float64(jcpu))
}

// throughput measures n real jobs on the instance h serves, between two
// measurements of the machine's own fork rate.
func throughput(h *flux.Handle, n, size, window int, profile string) result {
	// warm up: a few jobs through every module before measuring
	if _, err := jobThroughput(h, 20, window, ""); err != nil {
		fatal(err)
	}
	pids := brokerPIDs(h, size)
	var r result
	var f1, f2 time.Duration
	r.raw1, f1 = forkRate(2, 2*time.Second)
	// the job shells (processes of their own, parents of the tasks) are
	// counted with the brokers: those started during the run from zero
	cpu0 := readSplit(pids, shellPIDs(h, size))
	jobs, err := jobThroughput(h, n, window, profile)
	if err != nil {
		fatal(err)
	}
	r.jobs = jobs
	r.cpu = readSplit(pids, shellPIDs(h, size)).sub(cpu0).per(n)
	r.raw2, f2 = forkRate(2, 2*time.Second)
	r.raw = (r.raw1 + r.raw2) / 2
	r.fcpu = (f1 + f2) / 2
	return r
}

// alternate runs the throughput figure for base and bin in turns, a
// fresh instance each, and prints every pair's ratios (new / base).
func alternate(base, bin string, rounds, n, size, window int, profile string) {
	one := func(b, prof string) result {
		inst, err := benchkit.Start(b, size)
		if err != nil {
			fatal(err)
		}
		defer inst.Stop()
		h, err := flux.Open(inst.URI)
		if err != nil {
			fatal(err)
		}
		defer h.Close()
		return throughput(h, n, size, window, prof)
	}
	var jr, cr []float64
	for i := 0; i < rounds; i++ {
		b := one(base, "")
		prof := ""
		if i == rounds-1 {
			prof = profile
		}
		a := one(bin, prof)
		for _, x := range []struct {
			name string
			r    result
		}{{"base", b}, {"new ", a}} {
			fmt.Printf("round %d %s: %6.0f jobs/s against %6.0f forks/s = %5.1f %%; CPU %.2f ms a job (brokers %.2f, shells %.2f, tasks %.2f, exited shells %.2f) against %.2f ms a fork = %5.1f %%\n",
				i+1, x.name, x.r.jobs, x.r.raw, 100*x.r.jobs/x.r.raw, ms(x.r.cpu.total()),
				ms(x.r.cpu.brokers), ms(x.r.cpu.shells), ms(x.r.cpu.tasks), ms(x.r.cpu.exited),
				ms(x.r.fcpu), 100*float64(x.r.fcpu)/float64(x.r.cpu.total()))
		}
		jr = append(jr, a.jobs/b.jobs)
		cr = append(cr, float64(a.cpu.total())/float64(b.cpu.total()))
		fmt.Printf("round %d new/base: jobs/s %.2f, CPU per job %.2f   (load average %s)\n", i+1, jr[i], cr[i], benchkit.LoadAvg())
	}
	if rounds > 1 {
		fmt.Printf("median new/base over %d rounds: jobs/s %.2f, CPU per job %.2f\n", rounds, median(jr), median(cr))
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
