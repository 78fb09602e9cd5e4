package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestContentGC checks flux shutdown --gc: the content store loses the
// objects no KVS root reaches (the superseded directory versions of every
// commit) and its file shrinks; after the restart every job, its
// eventlog and every KVS value are still there. [kvs] gc-threshold
// collects without --gc, --skip-gc skips it, and a module reload (the
// KVS still running) never collects.
func TestContentGC(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	state, conf := t.TempDir(), t.TempDir()
	start := func() *env {
		return &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1,
			Args: []string{"--config-path", conf}, Attrs: map[string]string{"statedir": state}})}
	}
	db := filepath.Join(state, "content.sqlite")
	e := start()
	e.must("submit", "--quiet", "--cc=1-200", "--setattr=system.exec.test.run_duration=0", "true")
	e.must("kvs", "put", "keep.me=hello")
	e.must("queue", "idle")
	before := e.snapshotListing()
	r := e.flux("shutdown", "--gc")
	if r.Code != 0 {
		t.Fatalf("flux shutdown --gc: %+v", r)
	}
	m := regexp.MustCompile(`garbage collected kept=(\d+) .*removed=(\d+) .*file_before=([\d.]+) MB file_after=([\d.]+) MB`).FindStringSubmatch(r.Stderr)
	if m == nil {
		t.Fatalf("flux shutdown --gc did not report a collection:\n%s", r.Stderr)
	}
	removed, _ := strconv.Atoi(m[2])
	fb, _ := strconv.ParseFloat(m[3], 64)
	fa, _ := strconv.ParseFloat(m[4], 64)
	if removed == 0 || fa >= fb {
		t.Errorf("collection removed %d objects, file %.1f -> %.1f MB", removed, fb, fa)
	}
	e.inst.Stop()
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}

	e = start()
	if got := e.snapshotListing(); strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Fatalf("jobs after the collection differ")
	}
	// every job's records still load: the whole KVS dumps
	if r := e.flux("dump", filepath.Join(t.TempDir(), "all.tar")); r.Code != 0 {
		t.Fatalf("flux dump after the collection: %+v", r)
	}
	if v := strings.TrimSpace(e.must("kvs", "get", "keep.me")); v != "hello" {
		t.Errorf("keep.me = %q", v)
	}
	id := strings.Fields(before[0])[0]
	if log := e.must("job", "eventlog", id); !strings.Contains(log, "clean") {
		t.Errorf("eventlog of %s after the collection:\n%s", id, log)
	}
	// a reload with the KVS running does not collect, even when asked
	e.must("module", "reload", "content-sqlite")
	if r := e.flux("shutdown", "--skip-gc"); r.Code != 0 || strings.Contains(r.Stderr, "garbage collected") {
		t.Fatalf("--skip-gc: %+v", r)
	}
	e.inst.Stop()
	if fi2, _ := os.Stat(db); fi2 == nil || fi2.Size() < fi.Size() {
		t.Errorf("the file shrank without a collection")
	}

	// [kvs] gc-threshold: every shutdown after 1 commit collects
	if err := os.WriteFile(filepath.Join(conf, "kvs.toml"), []byte("[kvs]\ngc-threshold = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e = start()
	e.must("kvs", "put", "more=1")
	e.must("module", "reload", "content-sqlite")
	if log := e.must("dmesg"); !strings.Contains(log, "not collecting garbage: the KVS is still loaded") {
		t.Errorf("a reload did not say it left the garbage:\n%s", log)
	}
	e.inst.Stop()
	// (a reloaded content-sqlite unloads before the KVS at the shutdown,
	// so that one does not collect either: a fresh start does)
	e = start()
	e.must("kvs", "put", "more=2")
	r = e.flux("shutdown")
	if r.Code != 0 || !strings.Contains(r.Stderr, "gc-threshold is 1") || !strings.Contains(r.Stderr, "garbage collected") {
		t.Fatalf("shutdown with gc-threshold = 1: %+v", r)
	}
	e.inst.Stop()
	e = start()
	if v := strings.TrimSpace(e.must("kvs", "get", "more")); v != "2" {
		t.Errorf("more = %q after the threshold collection", v)
	}
	if r := e.flux("shutdown", "--gc", "--skip-gc"); r.Code == 0 || !strings.Contains(r.Stderr, "contradict") {
		t.Errorf("--gc --skip-gc: %+v", r)
	}
}

// TestContentGCNeedsStatedir: --gc on an instance whose content store is
// a scratch database is refused, and the instance keeps running.
func TestContentGCNeedsStatedir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1})}
	e.fail("no statedir", "shutdown", "--gc")
	e.must("kvs", "put", "still=running")
}
