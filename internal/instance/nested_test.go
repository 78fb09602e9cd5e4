package instance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func TestCriticalRanks(t *testing.T) {
	for _, tc := range []struct {
		size, fanout uint32
		want         string
	}{
		{1, 2, "0"}, {2, 2, "0"}, {3, 2, "0"}, {4, 2, "0-1"}, {7, 2, "0-2"}, {8, 2, "0-3"},
		{16, 16, "0"}, {17, 16, "0"}, {18, 16, "0-1"}, {5, 0, "0-1"},
	} {
		if got := criticalRanks(tc.size, tc.fanout); got != tc.want {
			t.Errorf("criticalRanks(%d, %d) = %s, want %s", tc.size, tc.fanout, got, tc.want)
		}
	}
}

func TestDetectEnclosing(t *testing.T) {
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Attrs: map[string]string{"instance-level": "2"}})
	t.Setenv("FLUX_URI", inst.Brokers[0].LocalURI())
	t.Setenv("FLUX_JOB_ID", "ƒ2")
	t.Setenv("FLUX_TASK_RANK", "0")
	t.Setenv("PMI_RANK", "0")
	enc := detectEnclosing()
	if enc == nil || enc.level != 3 || enc.id != jobid.ID(1) || enc.uri != inst.Brokers[0].LocalURI() {
		t.Fatalf("enclosing %+v", enc)
	}
	for _, v := range []string{"FLUX_URI", "FLUX_JOB_ID", "FLUX_TASK_RANK", "PMI_RANK"} {
		if _, set := os.LookupEnv(v); set {
			t.Errorf("%s is still set", v)
		}
	}
	cfg := broker.Config{}
	enc.apply(&cfg)
	if cfg.Attrs["instance-level"] != "3" || cfg.Attrs["jobid"] != "ƒ2" || cfg.Attrs["parent-uri"] == "" {
		t.Fatalf("attrs %v", cfg.Attrs)
	}
	// a stale FLUX_URI is no enclosing instance
	t.Setenv("FLUX_URI", "local://"+filepath.Join(t.TempDir(), "local"))
	if enc := detectEnclosing(); enc != nil {
		t.Fatalf("stale FLUX_URI: %+v", enc)
	}
}
