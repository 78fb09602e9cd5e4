package instance

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
)

func TestApplyTorpid(t *testing.T) {
	tbon := func(kv ...string) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return map[string]any{"tbon": m}
	}
	for _, tc := range []struct {
		name     string
		attrs    map[string]string
		table    map[string]any
		min, max time.Duration
		err      string
	}{
		{name: "none"},
		{name: "attrs", attrs: map[string]string{"tbon.torpid_min": "1s", "tbon.torpid_max": "1m"}, min: time.Second, max: time.Minute},
		{name: "table", table: tbon("torpid_min", "2s", "torpid_max", "10s"), min: 2 * time.Second, max: 10 * time.Second},
		{name: "attr wins", attrs: map[string]string{"tbon.torpid_max": "20s"}, table: tbon("torpid_max", "10s"), max: 20 * time.Second},
		{name: "max 0 disables", table: tbon("torpid_max", "0"), max: -1},
		{name: "min 0", attrs: map[string]string{"tbon.torpid_min": "0"}, err: "-S tbon.torpid_min: \"0\": must be greater than zero"},
		{name: "bad fsd", table: tbon("torpid_max", "soon"), err: "[tbon] torpid_max: \"soon\": want a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg broker.Config
			err := applyTorpid(tc.attrs, tc.table, &cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.TorpidMin != tc.min || cfg.TorpidMax != tc.max {
				t.Errorf("min %v max %v, want %v %v", cfg.TorpidMin, cfg.TorpidMax, tc.min, tc.max)
			}
		})
	}
}
