package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
)

// ctxSwitches is the number of context switches (voluntary and not) of
// every thread of a process so far: /proc/PID/status counts only the
// thread-group leader's, so the threads' are summed.
func ctxSwitches(pid string) int64 {
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return 0
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + t.Name() + "/status")
		if err != nil {
			continue // the thread went
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			} else if v, ok := strings.CutPrefix(l, "nonvoluntary_ctxt_switches:"); ok {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// threads is a process's thread count.
func threads(pid string) int {
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return 0
	}
	return len(tasks)
}

// memSplit is what a process's resident set is made of, in KiB: its
// anonymous pages (heap, stacks: its own) and its file pages (the
// binary's text and data, shared with every process of the binary).
type memSplit struct{ anon, file int }

func procMem(pid string) memSplit {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return memSplit{}
	}
	var m memSplit
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "RssAnon:":
			m.anon = n
		case "RssFile:":
			m.file = n
		}
	}
	return m
}

// classes is the CPU brokers and job-shell servers used, by kind: rank
// 0, the interior brokers (with children), the leaves, the shell
// servers (per process, and how many of each).
type classes struct {
	rank0                  float64 // ms
	interior, leaf, shell  float64 // ms per process
	nInterior, nLeaf, nShl int
}

// classCPU splits the CPU of brokers (by rank: ranks[r] is rank r's
// pid) and shell servers at the join.
func classCPU(ranks, shells []string, fanout int) classes {
	var c classes
	size := len(ranks)
	var interior, leaf time.Duration
	for r, pid := range ranks {
		cpu := benchkit.ProcCPU(false, pid)
		switch {
		case r == 0:
			c.rank0 = ms(cpu)
		case r*fanout+1 < size:
			interior += cpu
			c.nInterior++
		default:
			leaf += cpu
			c.nLeaf++
		}
	}
	c.nShl = len(shells)
	per := func(d time.Duration, n int) float64 {
		if n == 0 {
			return 0
		}
		return ms(d) / float64(n)
	}
	c.interior, c.leaf = per(interior, c.nInterior), per(leaf, c.nLeaf)
	c.shell = per(benchkit.ProcCPU(false, shells...), c.nShl)
	return c
}

func (c classes) String() string {
	return fmt.Sprintf("rank 0 %.0f ms, %d interior %.0f ms each, %d leaves %.0f ms each, %d job-shell servers %.0f ms each",
		c.rank0, c.nInterior, c.interior, c.nLeaf, c.leaf, c.nShl, c.shell)
}

// isLeaf says whether pid is a leaf broker's: pids[0] is flux start's,
// pids[1+r] rank r's.
func isLeaf(pid string, pids []string, fanout int) bool {
	size := len(pids) - 1
	for i, p := range pids[1:] {
		if p == pid {
			return i > 0 && i*fanout+1 >= size
		}
	}
	return false
}
