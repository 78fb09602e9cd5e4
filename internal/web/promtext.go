package web

import (
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Prometheus's text exposition format (version 0.0.4), written here
// rather than with client_golang: linking that library costs every flux
// process (CLI, broker, job shell) its package initialisation, 6-12 ms
// of CPU per process on a 2-core VM (measured against a bare Go binary),
// while /metrics needs only a few gauges and counters built per scrape.

// metricKind is a family's TYPE.
type metricKind string

const (
	gaugeKind   metricKind = "gauge"
	counterKind metricKind = "counter"
)

// metricDesc names a metric family: its name, help, type and label
// names.
type metricDesc struct {
	name   string
	help   string
	kind   metricKind
	labels []string
}

func newDesc(name, help string, kind metricKind, labels ...string) *metricDesc {
	return &metricDesc{name: name, help: help, kind: kind, labels: labels}
}

// metricSet collects one scrape's samples.
type metricSet struct {
	fams map[*metricDesc][]sample
}

type sample struct {
	labels string // rendered {a="x",b="y"}, names sorted
	value  float64
}

func newMetricSet() *metricSet { return &metricSet{fams: map[*metricDesc][]sample{}} }

// add records a sample of d; values are d's label values in order.
func (m *metricSet) add(d *metricDesc, v float64, values ...string) {
	m.fams[d] = append(m.fams[d], sample{labels: renderLabels(d.labels, values), value: v})
}

func renderLabels(names, values []string) string {
	if len(names) == 0 {
		return ""
	}
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return names[idx[a]] < names[idx[b]] })
	var b strings.Builder
	b.WriteByte('{')
	for k, i := range idx {
		if k > 0 {
			b.WriteByte(',')
		}
		v := ""
		if i < len(values) {
			v = values[i]
		}
		b.WriteString(names[i])
		b.WriteString(`="`)
		b.WriteString(labelEscaper.Replace(v))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// write renders the set: families by name, samples by labels, as
// client_golang does, so the output is stable between scrapes.
func (m *metricSet) write(buf *bytes.Buffer) {
	descs := make([]*metricDesc, 0, len(m.fams))
	for d := range m.fams {
		descs = append(descs, d)
	}
	sort.Slice(descs, func(a, b int) bool { return descs[a].name < descs[b].name })
	for _, d := range descs {
		ss := m.fams[d]
		sort.SliceStable(ss, func(a, b int) bool { return ss[a].labels < ss[b].labels })
		buf.WriteString("# HELP " + d.name + " " + helpEscaper.Replace(d.help) + "\n")
		buf.WriteString("# TYPE " + d.name + " " + string(d.kind) + "\n")
		for _, s := range ss {
			buf.WriteString(d.name)
			buf.WriteString(s.labels)
			buf.WriteByte(' ')
			buf.WriteString(formatValue(s.value))
			buf.WriteByte('\n')
		}
	}
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// scrapeCacher serves one rendering for ttl, so scrapes more frequent
// than that cost the instance nothing more.
type scrapeCacher struct {
	render func() []byte
	ttl    time.Duration

	mu  sync.Mutex
	at  time.Time
	out []byte
}

func (c *scrapeCacher) get() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil || time.Since(c.at) >= c.ttl {
		c.out = c.render()
		c.at = time.Now()
	}
	return c.out
}
