package web

import (
	"os"
	"regexp"
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

// TestGrafanaDashboard: every series docs/grafana-dashboard.json plots
// is one /metrics serves.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 64)
	(&collector{}).Describe(ch)
	(&statsCollector{}).Describe(ch)
	close(ch)
	served := map[string]bool{}
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range ch {
		if m := name.FindStringSubmatch(d.String()); m != nil {
			served[m[1]] = true
		}
	}
	used := regexp.MustCompile(`flux_[a-z_]+`).FindAllString(string(b), -1)
	if len(used) < 10 {
		t.Fatalf("the dashboard plots only %d series", len(used))
	}
	for _, u := range used {
		if !served[u] {
			t.Errorf("the dashboard plots %s, which /metrics does not serve", u)
		}
	}
}
