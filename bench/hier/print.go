package main

import (
	"fmt"
	"io"
	"sort"
)

var levelOrder = map[string]int{"parent": 0, "child": 1, "leaf": 2, "flat": 3}

// print writes a run's figures: the time and rate, each instance's jobs,
// peak RSS and CPU by level, and the CPU floor.
func (r *result) print(w io.Writer, c *config) {
	fmt.Fprintf(w, "%s: %d jobs in %.1f s: %.0f jobs/s", r.shape, c.n, r.secs, float64(c.n)/r.secs)
	if r.fill > 0 {
		fmt.Fprintf(w, " (of which filling the pool %.1f s)", r.fill)
	}
	fmt.Fprintf(w, "  (load average after: %s)\n", r.load)
	sort.Slice(r.entries, func(i, j int) bool {
		a, b := r.entries[i], r.entries[j]
		if levelOrder[a.Level] != levelOrder[b.Level] {
			return levelOrder[a.Level] < levelOrder[b.Level]
		}
		return a.Name < b.Name
	})
	var cpu, feeder float64
	maxKB, maxName := 0, ""
	fmt.Fprintf(w, "   %-7s %-9s %9s %7s %12s %11s %12s %14s\n", "level", "instance", "jobs", "failed", "peak RSS MB", "RSS at end", "broker CPU s", "feeder CPU s")
	for _, e := range r.entries {
		hwm := max(e.HWMKB, r.peakKB[e.Name])
		flag := ""
		if hwm > c.rssLimitKB {
			flag = "  over the limit"
		}
		fmt.Fprintf(w, "   %-7s %-9s %9d %7d %12.1f %11.1f %12.1f %14.1f%s\n", e.Level, e.Name, e.Jobs, e.Failed,
			float64(hwm)/1024, float64(e.RSSKB)/1024, e.CPU, e.FeederCPU, flag)
		// each broker reports its own CPU; of the feeders, only the
		// job-running instances' (capacitor, pool pull) are per job
		cpu += e.CPU
		if e.Level == "leaf" || e.Level == "flat" {
			feeder += e.FeederCPU
		}
		if hwm > maxKB {
			maxKB, maxName = hwm, e.Name
		}
	}
	per := (cpu + feeder) / float64(c.n)
	fmt.Fprintf(w, "   CPU: brokers %.1f s, feeders (capacitor / pool pull) %.1f s: %.0f µs a job; on %d CPUs the CPU floor is %.1f s (%.0f jobs/s); the run took %.2fx that\n",
		cpu, feeder, per*1e6, numCPU(), per*float64(c.n)/float64(numCPU()), float64(numCPU())/per, r.secs/(per*float64(c.n)/float64(numCPU())))
	fmt.Fprintf(w, "   largest peak RSS: %.1f MB (%s); limit %d MB\n", float64(maxKB)/1024, maxName, c.rssLimitKB/1024)
}

// printRatios prints each shape's median time and its ratio to the
// first shape's.
func printRatios(w io.Writer, list []string, times map[string][]float64) {
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	base := med(times[list[0]])
	for _, s := range list {
		m := med(times[s])
		fmt.Fprintf(w, "median %-9s %.1f s (%d runs), %.2fx %s's time\n", s, m, len(times[s]), m/base, list[0])
	}
}
