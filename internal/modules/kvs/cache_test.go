package kvs

import (
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/modules/kvs/treeobj"
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
