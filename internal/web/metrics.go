package web

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"time"
)

// scrapeTimeout bounds the instance calls of one /metrics scrape.
const scrapeTimeout = 5 * time.Second

// jobStateKeys are job-list.job-stats's state keys, in RFC 21 order.
var jobStateKeys = []string{"depend", "priority", "sched", "run", "cleanup", "inactive"}

var (
	descUp = newDesc("flux_up",
		"1 when the last scrape reached the instance's job-list and resource services, 0 otherwise.", gaugeKind)
	descJobs = newDesc("flux_jobs",
		"Jobs by state and queue (queue=\"\" for jobs in no named queue); inactive jobs purged from job-list are not counted.",
		gaugeKind, "state", "queue")
	descSubmitted = newDesc("flux_jobs_submitted_total",
		"Jobs submitted to the instance since it started (including those purged since).", counterKind)
	descCompleted = newDesc("flux_jobs_completed_total",
		"Jobs that became inactive since the instance started (including those purged since).", counterKind)
	descResults = newDesc("flux_jobs_inactive",
		"Inactive jobs job-list still holds, by result.", gaugeKind, "result")
	descNodes = newDesc("flux_nodes",
		"Nodes by state: total, up, down, drained, offline, allocated (holding a job) and free (up, holding none). The states overlap.",
		gaugeKind, "state")
)

// collector gathers the instance's metrics on each scrape.
type collector struct {
	inst Instance
	log  *slog.Logger
}

// descs are the families the collector serves.
func (c *collector) descs() []*metricDesc {
	return []*metricDesc{descUp, descJobs, descSubmitted, descCompleted, descResults, descNodes}
}

func (c *collector) collect(ch *metricSet) {
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
	ch.add(descUp, up)
}

func collectJobs(ch *metricSet, st JobStats) {
	gauge := func(d *metricDesc, v int, labels ...string) {
		ch.add(d, float64(v), labels...)
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
	ch.add(descSubmitted, float64(st.JobStates["total"]+st.InactivePurged))
	ch.add(descCompleted, float64(st.JobStates["inactive"]+st.InactivePurged))
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

func collectNodes(ch *metricSet, n Nodes) {
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
		ch.add(descNodes, float64(s.n), s.state)
	}
}

// metricsHandler serves /metrics: the instance's collector only (not
// this process's Go runtime: the instance is what is watched), one
// rendering per scrapeCache.
func (s *Server) metricsHandler() http.Handler {
	c := &collector{inst: s.o.Instance, log: s.o.Log}
	si, _ := s.o.Instance.(statsInstance)
	cache := &scrapeCacher{ttl: scrapeCache, render: func() []byte {
		set := newMetricSet()
		c.collect(set)
		if si != nil {
			(&statsCollector{inst: si, log: s.o.Log}).collect(set) // metrics_instance.go
		}
		var buf bytes.Buffer
		set.write(&buf)
		return buf.Bytes()
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(cache.get())
	})
}
