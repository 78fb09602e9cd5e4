package cluster_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// markerScript is a job's task: it appends a timestamp (seconds since
// the epoch) to MARKS/<hostname> ten times a second until killed.
const markerScript = `#!/bin/sh
f="$1/$(hostname)"
while :; do date +%s.%N >> "$f"; sleep 0.1; done
`

// lastMark is the last timestamp in a marker file and its line count.
func lastMark(t *testing.T, path string) (float64, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	var last float64
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64); err == nil {
			last, n = v, n+1
		}
	}
	return last, n
}

type jobEvent struct {
	Timestamp float64        `json:"timestamp"`
	Name      string         `json:"name"`
	Context   map[string]any `json:"context"`
}

// eventlog reads a job's eventlog (main, or exec with -p exec).
func eventlog(t *testing.T, bin, rundir, id string, extra ...string) []jobEvent {
	t.Helper()
	args := append([]string{"job", "eventlog", "-f", "json"}, extra...)
	out, err := fluxCmd(t, bin, rundir, append(args, id)...)
	if err != nil {
		t.Fatalf("flux job eventlog %s: %v: %s", id, err, out)
	}
	var evs []jobEvent
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev jobEvent
		if json.Unmarshal([]byte(l), &ev) == nil {
			evs = append(evs, ev)
		}
	}
	return evs
}

// TestPartition: a job runs on three hosts; one host's link goes down.
// The host is lost after tbon.timeout, the job gets a node-failure
// exception naming the rank and host once job-exec.reattach-timeout has
// passed, and ends; the host's node is offline and new jobs run on the
// other two. The cut-off broker, finding its parent silent, kills the
// job's tasks on its host (they write a marker file): nothing of the
// job runs there after the instance ended it, while the host is cut off
// or after its link comes back and its broker rejoins, and the job's
// eventlogs get nothing from it afterwards. The host then runs jobs
// again.
func TestPartition(t *testing.T) {
	t.Parallel() // its own hosts and bridge
	c, bin := failureCluster(t, 3, 2)
	r0 := rundirOf(c.Hosts[0])
	cut := c.Hosts[2]
	marks := filepath.Join(c.Dir, "marks")
	if err := os.Mkdir(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(c.Dir, "mark.sh")
	if err := os.WriteFile(script, []byte(markerScript), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := fluxCmd(t, bin, r0, "submit", "-N3", "--job-name=spread", script, marks)
	if err != nil {
		t.Fatalf("flux submit: %v: %s", err, out)
	}
	id := strings.TrimSpace(out)
	poll(t, 30*time.Second, "the job's tasks writing on all three hosts", func() (bool, string) {
		var have []string
		for _, h := range c.Hosts {
			if _, n := lastMark(t, filepath.Join(marks, h.Name)); n > 0 {
				have = append(have, h.Name)
			}
		}
		return len(have) == 3, strings.Join(have, " ")
	})

	if err := cut.LinkDown(); err != nil {
		t.Fatal(err)
	}
	linkUp := false
	t.Cleanup(func() {
		if !linkUp {
			cut.LinkUp()
		}
	})
	start := time.Now()
	var exc jobEvent
	poll(t, failTimeout+failReattach+30*time.Second, "a node-failure exception", func() (bool, string) {
		for _, ev := range eventlog(t, bin, r0, id) {
			if ev.Name == "exception" && ev.Context["type"] == "node-failure" {
				exc = ev
				return true, ""
			}
		}
		return false, "no node-failure exception yet"
	})
	t.Logf("link down: node-failure exception after %v (tbon.timeout %v + job-exec.reattach-timeout %v): %v",
		time.Since(start).Round(time.Millisecond), failTimeout, failReattach, exc.Context["note"])
	note, _ := exc.Context["note"].(string)
	if !strings.Contains(note, "rank 2") || !strings.Contains(note, cut.Name) {
		t.Errorf("the exception's note %q does not name rank 2 and %s", note, cut.Name)
	}
	if sev, _ := exc.Context["severity"].(float64); sev != 0 {
		t.Errorf("node-failure severity %v, want 0 (fatal)", exc.Context["severity"])
	}
	poll(t, 30*time.Second, "the job inactive", func() (bool, string) {
		out, _ := fluxCmd(t, bin, r0, "jobs", "-n", "-o", "{state}", id)
		return strings.TrimSpace(out) == "INACTIVE", out
	})
	ended := time.Since(start)
	if got := resourceSet(t, bin, r0, "offline"); got != cut.Name {
		t.Errorf("offline %q, want %s", got, cut.Name)
	}
	// new work runs on the other hosts
	out, err = fluxCmd(t, bin, r0, "run", "-N2", "hostname")
	if err != nil {
		t.Fatalf("flux run -N2 with %s cut off: %v: %s", cut.Name, err, out)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	if want := []string{c.Hosts[0].Name, c.Hosts[1].Name}; !slices.Equal(got, want) {
		t.Errorf("flux run -N2 hostname printed %q, want %q", got, want)
	}
	evs := eventlog(t, bin, r0, id)
	execEvs := eventlog(t, bin, r0, id, "-p", "exec")
	cutMarks := filepath.Join(marks, cut.Name)
	last, n := lastMark(t, cutMarks)
	t.Logf("the job ended %v after the link went down; its tasks on %s wrote their last mark %.2fs before its node-failure exception",
		ended.Round(time.Millisecond), cut.Name, exc.Timestamp-last)
	if last >= exc.Timestamp {
		t.Errorf("a task on cut-off %s wrote at %.3f, after the instance ended the job (exception at %.3f)", cut.Name, last, exc.Timestamp)
	}

	if err := cut.LinkUp(); err != nil {
		t.Fatal(err)
	}
	linkUp = true
	start = time.Now()
	poll(t, 60*time.Second, "rank 2 rejoined", func() (bool, string) {
		st := overlayState(t, bin, r0, 2)
		return st == "full", st
	})
	t.Logf("link up: rank 2 rejoined after %v", time.Since(start).Round(time.Millisecond))
	poll(t, 10*time.Second, cut.Name+" online", func() (bool, string) {
		got := resourceSet(t, bin, r0, "offline")
		return got == "", got
	})
	out, err = fluxCmd(t, bin, r0, "run", "-N3", "hostname")
	if err != nil {
		t.Fatalf("flux run -N3 after the link came back: %v: %s", err, out)
	}
	if !strings.Contains(out, cut.Name) {
		t.Errorf("flux run -N3 hostname printed %q: %s missing", out, cut.Name)
	}
	// the rejoined broker's shells had nothing to hand over: the old
	// job's eventlogs are as they were, and its tasks wrote nothing
	if after := eventlog(t, bin, r0, id); len(after) != len(evs) {
		t.Errorf("the ended job's eventlog grew after %s rejoined: %d events, then %d: %v", cut.Name, len(evs), len(after), after[len(evs):])
	}
	if after := eventlog(t, bin, r0, id, "-p", "exec"); len(after) != len(execEvs) {
		t.Errorf("the ended job's exec eventlog grew after %s rejoined: %d events, then %d: %v", cut.Name, len(execEvs), len(after), after[len(execEvs):])
	}
	if l2, n2 := lastMark(t, cutMarks); n2 != n {
		t.Errorf("the job's tasks on %s wrote %d more marks after it rejoined (last at %.3f)", cut.Name, n2-n, l2)
	}
}
