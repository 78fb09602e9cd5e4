package web

import (
	"bytes"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestScrapeCacher: scrapes within the cache time share one rendering.
func TestScrapeCacher(t *testing.T) {
	n := 0
	c := &scrapeCacher{ttl: time.Hour, render: func() []byte { n++; return []byte{byte(n)} }}
	for range 3 {
		if got := c.get(); len(got) != 1 || got[0] != 1 {
			t.Fatalf("get: %v", got)
		}
	}
	c.ttl = 0
	if got := c.get(); got[0] != 2 || n != 2 {
		t.Errorf("an expired cache did not render again (%d renderings)", n)
	}
}

// TestPromText: what metricSet writes is read back by Prometheus's own
// text parser, names, labels (escaped), types and values intact.
func TestPromText(t *testing.T) {
	g := newDesc("t_gauge", "a gauge\nwith \\ two lines", gaugeKind, "zone", "a")
	c := newDesc("t_total", "a counter", counterKind)
	set := newMetricSet()
	set.add(g, 1.5, `quo"te`, "x")
	set.add(g, math.Inf(1), "back\\slash\nnl", "y")
	set.add(c, 42)
	var buf bytes.Buffer
	set.write(&buf)
	if !strings.Contains(buf.String(), `t_gauge{a="x",zone="quo\"te"} 1.5`+"\n") {
		t.Errorf("labels not sorted by name or not escaped:\n%s", buf.String())
	}
	parser := expfmt.NewTextParser(model.LegacyValidation) // the classic name rules
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("prometheus parser: %v\n%s", err, buf.String())
	}
	fg, fc := fams["t_gauge"], fams["t_total"]
	if fg == nil || fc == nil || fg.GetType().String() != "GAUGE" || fc.GetType().String() != "COUNTER" {
		t.Fatalf("families %v", fams)
	}
	if fg.GetHelp() != "a gauge\nwith \\ two lines" || fc.GetMetric()[0].GetCounter().GetValue() != 42 {
		t.Errorf("help %q, counter %v", fg.GetHelp(), fc.GetMetric()[0].GetCounter().GetValue())
	}
	got := map[string]float64{}
	for _, m := range fg.GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		got[l["zone"]+"|"+l["a"]] = m.GetGauge().GetValue()
	}
	if got[`quo"te|x`] != 1.5 || !math.IsInf(got["back\\slash\nnl|y"], 1) {
		t.Errorf("gauge samples %v", got)
	}
}

// TestGrafanaDashboard: every series docs/grafana-dashboard.json plots
// is one /metrics serves.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, d := range append((&collector{}).descs(), (&statsCollector{}).descs()...) {
		served[d.name] = true
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
