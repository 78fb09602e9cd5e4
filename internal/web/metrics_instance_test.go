package web

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCachedGatherer: scrapes within the cache time share one gathering.
func TestCachedGatherer(t *testing.T) {
	reg := prometheus.NewRegistry()
	n := 0
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gathered"}, func() float64 { n++; return float64(n) }))
	g := &cachedGatherer{g: reg, ttl: time.Hour}
	for range 3 {
		mfs, err := g.Gather()
		if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("gather: %v %v", mfs, err)
		}
	}
	g.ttl = 0
	if mfs, _ := g.Gather(); mfs[0].GetMetric()[0].GetGauge().GetValue() != 2 || n != 2 {
		t.Errorf("an expired cache did not gather again (%d gatherings)", n)
	}
}
