package kvs

import (
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

func TestCacheExpiry(t *testing.T) {
	c := newCache(nil, "sha1")
	t0 := time.Now()
	c.now = t0
	for _, ref := range []string{"old", "superseded", "reused", "dirty", "root"} {
		e := c.putDir(ref, treeobj.NewDir())
		e.stored = ref != "dirty"
	}
	c.supersede([]string{"superseded", "reused"})
	c.now = t0.Add(500 * time.Millisecond)
	c.getDir("reused") // a lookup of an old root after the supersede
	c.now = t0.Add(2 * time.Second)
	c.expire(10*time.Second, map[string]bool{"root": true})
	for ref, want := range map[string]bool{"old": true, "superseded": false, "reused": true, "dirty": true, "root": true} {
		if _, ok := c.m[ref]; ok != want {
			t.Errorf("after 2s: %s cached=%v, want %v", ref, ok, want)
		}
	}
	c.now = t0.Add(20 * time.Second)
	c.expire(10*time.Second, map[string]bool{"root": true})
	for ref, want := range map[string]bool{"old": false, "reused": false, "dirty": true, "root": true} {
		if _, ok := c.m[ref]; ok != want {
			t.Errorf("after 20s: %s cached=%v, want %v", ref, ok, want)
		}
	}
}

// TestCacheSupersededBetweenScans: superseded directories go after the
// grace period even between two scans of the whole cache; one whose
// store is not answered yet stays until it is.
func TestCacheSupersededBetweenScans(t *testing.T) {
	c := newCache(nil, "sha1")
	t0 := time.Now()
	c.now = t0
	c.expire(10*time.Second, nil) // a whole scan: the next is due at t0+5s
	for _, ref := range []string{"a", "b", "dirty", "kept"} {
		e := c.putDir(ref, treeobj.NewDir())
		e.stored = ref != "dirty"
	}
	c.now = t0.Add(time.Second)
	c.supersede([]string{"a", "dirty"})
	c.now = t0.Add(1100 * time.Millisecond)
	c.expire(10*time.Second, nil)
	if _, ok := c.m["a"]; !ok {
		t.Fatal("a went before its grace period")
	}
	c.now = t0.Add(1500 * time.Millisecond)
	c.expire(10*time.Second, nil)
	for ref, want := range map[string]bool{"a": false, "b": true, "dirty": true, "kept": true} {
		if _, ok := c.m[ref]; ok != want {
			t.Errorf("after 1.5s: %s cached=%v, want %v", ref, ok, want)
		}
	}
	c.m["dirty"].stored = true
	c.now = t0.Add(1800 * time.Millisecond)
	c.expire(10*time.Second, nil)
	if _, ok := c.m["dirty"]; ok {
		t.Error("a superseded directory stayed after its store was answered")
	}
	if len(c.supersededQ) != 0 {
		t.Errorf("queue left: %v", c.supersededQ)
	}
}
