package cluster_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// resilientBatch is the batch script of TestResilientBatch: a job on
// all three nodes of its instance, then (once the test says go, with
// one host cut off) a wait until its instance finds that broker gone
// and a job on the two nodes left.
const resilientBatch = `#!/bin/sh
d="$1"
flux run -N3 hostname > "$d/before" || exit 1
touch "$d/started"
while [ ! -e "$d/go" ]; do sleep 0.1; done
n=0
until [ "$(flux resource list -s down -n -o {nnodes})" = 1 ]; do
	sleep 0.2; n=$((n+1)); [ $n -gt 300 ] && exit 3
done
flux run -N2 hostname > "$d/after" || exit 4
echo done > "$d/done"
`

// TestResilientBatch: a flux batch job on three hosts loses one of its
// non-critical hosts (its link goes down). The batch job gets a
// non-fatal node-failure exception naming the host and keeps running:
// its nested instance finds its own broker there lost, runs a job on
// the two nodes left and the batch job completes successfully (its
// critical ranks, the nested instance's rank 0, are on host 0).
func TestResilientBatch(t *testing.T) {
	t.Parallel() // its own hosts and bridge
	c, bin := failureCluster(t, 3, 2)
	r0 := rundirOf(c.Hosts[0])
	dir := filepath.Join(c.Dir, "batch")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(c.Dir, "batch.sh")
	if err := os.WriteFile(script, []byte(resilientBatch), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := fluxCmd(t, bin, r0, "batch", "-N3", "--output="+filepath.Join(dir, "out"),
		// a nested instance across hosts links over TCP: its brokers
		// need an instance key (fluxgo does not pass one through PMI)
		"--broker-opts=-Stbon.cert="+filepath.Join(c.Dir, "curve.cert"),
		"--broker-opts=-Stbon.timeout="+failTimeout.String(), script, dir)
	if err != nil {
		t.Fatalf("flux batch: %v: %s", err, out)
	}
	id := strings.TrimSpace(out)
	poll(t, 60*time.Second, "the batch job's first job done", func() (bool, string) {
		_, err := os.Stat(filepath.Join(dir, "started"))
		out, _ := fluxCmd(t, bin, r0, "jobs", "-n", "-o", "{state}", id)
		if err != nil && strings.TrimSpace(out) == "INACTIVE" {
			o, _ := os.ReadFile(filepath.Join(dir, "out"))
			ev, _ := fluxCmd(t, bin, r0, "job", "eventlog", id)
			t.Fatalf("the batch job ended before it ran its first job; its eventlog:\n%s\nits output:\n%s", ev, o)
		}
		return err == nil, "batch job " + strings.TrimSpace(out)
	})
	before, _ := os.ReadFile(filepath.Join(dir, "before"))
	t.Logf("inside the batch job, before: %q", before)
	cut := c.Hosts[2]
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
	t.Logf("link down: the batch job's node-failure exception after %v: %v (severity %v)",
		time.Since(start).Round(time.Millisecond), exc.Context["note"], exc.Context["severity"])
	if sev, _ := exc.Context["severity"].(float64); sev == 0 {
		t.Fatalf("the batch job's node-failure exception is fatal: %v", exc.Context)
	}
	if note, _ := exc.Context["note"].(string); !strings.Contains(note, "rank 2") {
		t.Errorf("the exception's note %q does not name rank 2", note)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "the batch job inactive", func() (bool, string) {
		out, _ := fluxCmd(t, bin, r0, "jobs", "-n", "-o", "{state}", id)
		return strings.TrimSpace(out) == "INACTIVE", out
	})
	t.Logf("the batch job finished %v after the link went down", time.Since(start).Round(time.Millisecond))
	res, _ := fluxCmd(t, bin, r0, "jobs", "-n", "-o", "{result} {returncode}", id)
	if strings.TrimSpace(res) != "COMPLETED 0" {
		o, _ := os.ReadFile(filepath.Join(dir, "out"))
		t.Errorf("the batch job ended %q, want COMPLETED 0; its output:\n%s", strings.TrimSpace(res), o)
	}
	after, err := os.ReadFile(filepath.Join(dir, "after"))
	if err != nil {
		t.Fatalf("the batch job ran no job after the host was lost: %v", err)
	}
	got := strings.Fields(string(after))
	slices.Sort(got)
	if want := []string{c.Hosts[0].Name, c.Hosts[1].Name}; !slices.Equal(got, want) {
		t.Errorf("inside the batch job after the loss, flux run -N2 hostname printed %q, want %q", got, want)
	}
	if err := cut.LinkUp(); err != nil {
		t.Fatal(err)
	}
	linkUp = true
}
