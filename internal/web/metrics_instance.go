package web

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// metricsModules are the broker modules whose message counts /metrics
// reports (one module.stats RPC each).
var metricsModules = []string{"job-manager", "job-list", "sched-simple", "kvs"}

// scrapeCache is how long one scrape's answer is served again.
const scrapeCache = time.Second

var (
	descPending = newDesc("flux_jobs_pending_reason",
		"Pending jobs by why they wait: the scheduler's reason_pending annotation, else held (urgency 0), depend or priority.", gaugeKind, "reason")
	descPasses = newDesc("flux_sched_passes_total",
		"Scheduling passes sched-simple has made.", counterKind)
	descPassTime = newDesc("flux_sched_pass_seconds_total",
		"Time sched-simple's passes took in all (rate() over flux_sched_passes_total's: the mean pass time).", counterKind)
	descLastPass = newDesc("flux_sched_last_pass_seconds",
		"How long sched-simple's last pass took.", gaugeKind)
	descRSS = newDesc("flux_broker_max_rss_bytes",
		"The rank 0 broker's peak resident memory (getrusage maxrss).", gaugeKind)
	descCPU = newDesc("flux_broker_cpu_seconds_total",
		"CPU time the rank 0 broker has used, by mode.", counterKind, "mode")
	descModRx = newDesc("flux_module_messages_received_total",
		"Messages a rank 0 broker module has received (rate(): messages/s).", counterKind, "module")
	descModTx = newDesc("flux_module_messages_sent_total",
		"Messages a rank 0 broker module has sent.", counterKind, "module")
)

// SchedStats is sched-simple.stats's answer.
type SchedStats struct {
	Passes      uint64  `json:"passes"`
	PassSeconds float64 `json:"pass_seconds"`
	LastPass    float64 `json:"last_pass_seconds"`
}

// BrokerStats are the rank 0 broker's resource use and its modules'
// message counts.
type BrokerStats struct {
	MaxRSSBytes  int64
	User, System float64
	// Modules maps a module to its received and sent message counts.
	Modules map[string][2]uint64
}

// statsInstance is the part of an Instance the extra metrics need; a
// Client has it.
type statsInstance interface {
	PendingReasons(ctx context.Context) (map[string]int, error)
	SchedStats(ctx context.Context) (SchedStats, error)
	BrokerStats(ctx context.Context) (BrokerStats, error)
}

func (c *Client) PendingReasons(ctx context.Context) (map[string]int, error) {
	req := job.ListRequest{Attrs: []string{"state", "urgency", "annotations"},
		Constraint: map[string]any{"states": []int{int(job.StatePending)}}}
	var resp struct {
		Jobs []struct {
			State       job.State `json:"state"`
			Urgency     int       `json:"urgency"`
			Annotations struct {
				Sched struct {
					Reason string `json:"reason_pending"`
				} `json:"sched"`
			} `json:"annotations"`
		} `json:"jobs"`
	}
	if err := c.h.Call(ctx, "job-list.list", flux.NodeidAny, req, &resp); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, j := range resp.Jobs {
		switch {
		case j.Annotations.Sched.Reason != "":
			out[j.Annotations.Sched.Reason]++
		case j.Urgency == 0:
			out["held"]++
		case j.State == job.StateDepend:
			out["depend"]++
		case j.State == job.StatePriority:
			out["priority"]++
		default:
			out["sched"]++
		}
	}
	return out, nil
}

func (c *Client) SchedStats(ctx context.Context) (SchedStats, error) {
	var s SchedStats
	err := c.h.Call(ctx, "sched-simple.stats", flux.NodeidAny, nil, &s)
	return s, err
}

func (c *Client) BrokerStats(ctx context.Context) (BrokerStats, error) {
	var ru struct {
		Utime  float64 `json:"utime"`
		Stime  float64 `json:"stime"`
		Maxrss int64   `json:"maxrss"`
	}
	if err := c.h.Call(ctx, "broker.rusage", 0, nil, &ru); err != nil {
		return BrokerStats{}, fmt.Errorf("broker.rusage: %w", err)
	}
	b := BrokerStats{MaxRSSBytes: ru.Maxrss * 1024, User: ru.Utime, System: ru.Stime, Modules: map[string][2]uint64{}}
	for _, name := range metricsModules {
		var st struct {
			Rx json.Number `json:"rx"`
			Tx json.Number `json:"tx"`
		}
		if err := c.h.Call(ctx, "module.stats", 0, map[string]string{"name": name}, &st); err != nil {
			continue // not loaded
		}
		rx, _ := st.Rx.Int64()
		tx, _ := st.Tx.Int64()
		b.Modules[name] = [2]uint64{uint64(max(rx, 0)), uint64(max(tx, 0))}
	}
	return b, nil
}

// statsCollector gathers the metrics of a statsInstance.
type statsCollector struct {
	inst statsInstance
	log  interface{ Warn(string, ...any) }
}

// descs are the families the collector serves.
func (c *statsCollector) descs() []*metricDesc {
	return []*metricDesc{descPending, descPasses, descPassTime, descLastPass, descRSS, descCPU, descModRx, descModTx}
}

func (c *statsCollector) collect(ch *metricSet) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	m := ch.add
	if r, err := c.inst.PendingReasons(ctx); err != nil {
		c.log.Warn("metrics: pending jobs", "err", err)
	} else {
		for reason, n := range r {
			m(descPending, float64(n), reason)
		}
	}
	if s, err := c.inst.SchedStats(ctx); err != nil {
		c.log.Warn("metrics: sched-simple.stats", "err", err)
	} else {
		m(descPasses, float64(s.Passes))
		m(descPassTime, s.PassSeconds)
		m(descLastPass, s.LastPass)
	}
	if b, err := c.inst.BrokerStats(ctx); err != nil {
		c.log.Warn("metrics: broker stats", "err", err)
	} else {
		m(descRSS, float64(b.MaxRSSBytes))
		m(descCPU, b.User, "user")
		m(descCPU, b.System, "system")
		for name, rt := range b.Modules {
			m(descModRx, float64(rt[0]), name)
			m(descModTx, float64(rt[1]), name)
		}
	}
}
