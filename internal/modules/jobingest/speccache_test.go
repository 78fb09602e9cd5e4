package jobingest

import (
	"fmt"
	"testing"
)

func TestSpecCache(t *testing.T) {
	c := newSpecCache()
	good := []byte(`{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],` +
		`"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}`)
	a, err := c.check(good, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.check(append([]byte(nil), good...), false)
	if err != nil || a != b {
		t.Fatalf("identical jobspecs are not shared: %p %p %v", a, b, err)
	}
	// canonical but not version 1: refused unless novalidate
	v2 := []byte(`{"version":2,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],` +
		`"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0}}}`)
	if _, err := c.check(v2, false); err == nil {
		t.Error("version 2 jobspec accepted without novalidate")
	}
	if s, err := c.check(v2, true); err != nil || s == nil {
		t.Errorf("version 2 jobspec with novalidate: %v", err)
	}
	if _, err := c.check([]byte(`{"version":1}`), true); err == nil {
		t.Error("invalid jobspec accepted")
	}
	if _, err := c.check([]byte("version: 1\nresources: []\n"), true); err == nil {
		t.Error("YAML jobspec accepted")
	}
	// the cache stays bounded
	for i := 0; i < 3*specCacheSize; i++ {
		c.check([]byte(fmt.Sprintf(`{"version":%d}`, i)), true)
	}
	if c.entries.Len() > specCacheSize {
		t.Errorf("cache holds %d entries", c.entries.Len())
	}
}
