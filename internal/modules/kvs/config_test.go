package kvs

import (
	"testing"
	"time"
)

func TestConfigCacheExpiryByRank(t *testing.T) {
	for _, tc := range []struct {
		rank  uint32
		attrs map[string]string
		args  []string
		want  time.Duration
	}{
		{0, nil, nil, DefaultMasterCacheExpiry},
		{1, nil, nil, DefaultCacheExpiry},
		{0, map[string]string{"cache-expiry": "30s"}, nil, 30 * time.Second},
		{0, nil, []string{"cache-expiry=5"}, 5 * time.Second},
	} {
		c, err := parseConfig(tc.attrs, tc.args, tc.rank)
		if err != nil {
			t.Fatal(err)
		}
		if c.CacheExpiry != tc.want {
			t.Errorf("rank %d attrs %v args %v: cache expiry %v, want %v", tc.rank, tc.attrs, tc.args, c.CacheExpiry, tc.want)
		}
	}
	if _, err := parseConfig(nil, []string{"cache-expiry=-1"}, 0); err == nil {
		t.Error("a negative cache expiry was accepted")
	}
}
