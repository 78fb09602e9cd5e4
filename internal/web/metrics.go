package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scrapeTimeout bounds the instance calls of one /metrics scrape.
const scrapeTimeout = 5 * time.Second

// jobStateKeys are job-list.job-stats's state keys, in RFC 21 order.
var jobStateKeys = []string{"depend", "priority", "sched", "run", "cleanup", "inactive"}

var (
	descUp = prometheus.NewDesc("flux_up",
		"1 when the last scrape reached the instance's job-list and resource services, 0 otherwise.", nil, nil)
	descJobs = prometheus.NewDesc("flux_jobs",
		"Jobs by state and queue (queue=\"\" for jobs in no named queue); inactive jobs purged from job-list are not counted.",
		[]string{"state", "queue"}, nil)
	descSubmitted = prometheus.NewDesc("flux_jobs_submitted_total",
		"Jobs submitted to the instance since it started (including those purged since).", nil, nil)
	descCompleted = prometheus.NewDesc("flux_jobs_completed_total",
		"Jobs that became inactive since the instance started (including those purged since).", nil, nil)
	descResults = prometheus.NewDesc("flux_jobs_inactive",
		"Inactive jobs job-list still holds, by result.", []string{"result"}, nil)
	descNodes = prometheus.NewDesc("flux_nodes",
		"Nodes by state: total, up, down, drained, offline, allocated (holding a job) and free (up, holding none). The states overlap.",
		[]string{"state"}, nil)
)

// collector gathers the instance's metrics on each scrape.
type collector struct {
	inst Instance
	log  *slog.Logger
}

var _ prometheus.Collector = (*collector)(nil)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descJobs, descSubmitted, descCompleted, descResults, descNodes} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	up := 1.0
	if st, err := c.inst.JobStats(ctx); err != nil {
		c.log.Warn("metrics: job-list.job-stats", "err", err)
		up = 0
	} else {
		collectJobs(ch, st)
	}
	if n, err := c.inst.Nodes(ctx); err != nil {
		c.log.Warn("metrics: resource status", "err", err)
		up = 0
	} else {
		collectNodes(ch, n)
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up)
}

func collectJobs(ch chan<- prometheus.Metric, st JobStats) {
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	rest := map[string]int{}
	for _, k := range jobStateKeys {
		rest[k] = st.JobStates[k]
	}
	for _, q := range st.Queues {
		for _, k := range jobStateKeys {
			gauge(descJobs, q.JobStates[k], k, q.Name)
			rest[k] -= q.JobStates[k]
		}
	}
	if len(st.Queues) == 0 || anyPositive(rest) {
		for _, k := range jobStateKeys {
			gauge(descJobs, max(rest[k], 0), k, "")
		}
	}
	ch <- prometheus.MustNewConstMetric(descSubmitted, prometheus.CounterValue, float64(st.JobStates["total"]+st.InactivePurged))
	ch <- prometheus.MustNewConstMetric(descCompleted, prometheus.CounterValue, float64(st.JobStates["inactive"]+st.InactivePurged))
	gauge(descResults, st.Successful, "completed")
	gauge(descResults, st.Failed, "failed")
	gauge(descResults, st.Canceled, "canceled")
	gauge(descResults, st.Timeout, "timeout")
}

func anyPositive(m map[string]int) bool {
	for _, v := range m {
		if v > 0 {
			return true
		}
	}
	return false
}

func collectNodes(ch chan<- prometheus.Metric, n Nodes) {
	alloc := map[string]bool{}
	for _, h := range n.Allocated {
		alloc[h] = true
	}
	free := 0
	for _, h := range n.Up {
		if !alloc[h] {
			free++
		}
	}
	for _, s := range []struct {
		state string
		n     int
	}{{"total", len(n.All)}, {"up", len(n.Up)}, {"down", len(n.Down)}, {"drained", len(n.Drained)},
		{"offline", len(n.Offline)}, {"allocated", len(n.Allocated)}, {"free", free}} {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(s.n), s.state)
	}
}

// metricsHandler serves /metrics from a registry of the instance's
// collector only (not this process's Go runtime: the instance is what
// is watched).
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{inst: s.o.Instance, log: s.o.Log})
	if si, ok := s.o.Instance.(statsInstance); ok {
		reg.MustRegister(&statsCollector{inst: si, log: s.o.Log}) // metrics_instance.go
	}
	g := &cachedGatherer{g: reg, ttl: scrapeCache}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slogPrinter{s.o.Log}})
}

// slogPrinter adapts a slog.Logger to promhttp's Println logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "err", v) }
