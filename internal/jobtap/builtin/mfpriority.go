package builtin

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// MFPriority is the multi-factor priority plugin (issue 25; the role of
// flux-accounting's mf_priority), loaded by name: flux jobtap load
// mf-priority, or [job-manager] plugins = [{load = "mf-priority"}]. A
// job's priority is
//
//	fairshare-weight * fairshare   (its association's, in [0,1])
//	+ age-weight     * age         (time pending / age-max, at most 1)
//	+ size-weight    * size        (cores / size-max-cores, at most 1)
//	+ queue-weight   * queue       ([accounting.priority.queues] NAME = factor)
//	+ urgency-weight * (urgency - 16)
//
// rounded, and kept in [1, 2^32-2]; urgency 0 (held) is priority 0 and
// urgency 31 (expedite) the maximum, as with .priority-default. The
// accounting module sends the fair-share factors (accounting.
// PriorityUpdateTopic) after each pass over the job archive; the plugin
// then reprioritizes every pending job, and does so every interval too
// (for age). flux job priority --explain shows the factors
// (job-manager.mf-priority.explain).
type MFPriority struct {
	h       jobtap.Host
	cfg     mfConfig
	fs      map[accounting.AssocKey]float64
	fsTime  float64
	pending map[jobid.ID]struct{}
	stop    func() bool
	now     func() time.Time
}

var (
	_ jobtap.PriorityHook  = (*MFPriority)(nil)
	_ jobtap.StateHook     = (*MFPriority)(nil)
	_ jobtap.Loader        = (*MFPriority)(nil)
	_ jobtap.Unloader      = (*MFPriority)(nil)
	_ jobtap.ConfigUpdater = (*MFPriority)(nil)
	_ jobtap.Servicer      = (*MFPriority)(nil)
)

func newMFPriority() *MFPriority {
	p := &MFPriority{fs: map[accounting.AssocKey]float64{}, pending: map[jobid.ID]struct{}{}, now: time.Now}
	p.cfg.defaults()
	return p
}

// mfConfig is the [accounting.priority] table.
type mfConfig struct {
	FairshareWeight float64            `json:"fairshare-weight"`
	AgeWeight       float64            `json:"age-weight"`
	SizeWeight      float64            `json:"size-weight"`
	QueueWeight     float64            `json:"queue-weight"`
	UrgencyWeight   float64            `json:"urgency-weight"`
	AgeMax          string             `json:"age-max"`
	SizeMaxCores    int                `json:"size-max-cores"`
	Queues          map[string]float64 `json:"queues"`
	Interval        string             `json:"interval"`

	ageMax, interval time.Duration
}

// The defaults: fair-share dominates (flux-accounting's weight), a
// job's age and size count for little, urgency moves a job by 1,000 a
// step.
func (c *mfConfig) defaults() {
	*c = mfConfig{FairshareWeight: 100000, AgeWeight: 1000, SizeWeight: 0, QueueWeight: 10000, UrgencyWeight: 1000,
		AgeMax: "7d", SizeMaxCores: 1024, Interval: "1m"}
	c.ageMax, c.interval = 7*24*time.Hour, time.Minute
}

// Validate checks the table and parses its durations.
func (c *mfConfig) Validate() error {
	for name, w := range map[string]float64{"fairshare-weight": c.FairshareWeight, "age-weight": c.AgeWeight,
		"size-weight": c.SizeWeight, "queue-weight": c.QueueWeight, "urgency-weight": c.UrgencyWeight} {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("[accounting.priority] %s=%v: must be 0 or more: %w", name, w, syscall.EINVAL)
		}
	}
	var err error
	if c.ageMax, err = fsd.ParseDuration(c.AgeMax); err != nil || c.ageMax <= 0 {
		return fmt.Errorf("[accounting.priority] age-max=%q: want a duration such as \"7d\": %w", c.AgeMax, syscall.EINVAL)
	}
	if c.interval, err = fsd.ParseDuration(c.Interval); err != nil || c.interval < time.Second {
		return fmt.Errorf("[accounting.priority] interval=%q: want a duration of 1s or more: %w", c.Interval, syscall.EINVAL)
	}
	if c.SizeMaxCores < 1 {
		return fmt.Errorf("[accounting.priority] size-max-cores=%d: must be 1 or more: %w", c.SizeMaxCores, syscall.EINVAL)
	}
	return nil
}

// Name implements jobtap.Plugin.
func (*MFPriority) Name() string { return "mf-priority" }

// Load implements jobtap.Loader.
func (p *MFPriority) Load(h jobtap.Host, _ json.RawMessage) error {
	p.h = h
	p.arm()
	return nil
}

func (p *MFPriority) arm() {
	if p.stop != nil {
		p.stop()
	}
	p.stop = p.h.AfterFunc(p.cfg.interval, func() {
		p.reprioritizeAll()
		p.arm()
	})
}

// Unload implements jobtap.Unloader.
func (p *MFPriority) Unload() {
	if p.stop != nil {
		p.stop()
	}
}

// ConfigUpdate implements jobtap.ConfigUpdater.
func (p *MFPriority) ConfigUpdate(conf json.RawMessage) (func(), error) {
	var top struct {
		Accounting struct {
			Priority json.RawMessage `json:"priority"`
		} `json:"accounting"`
	}
	if len(conf) > 0 {
		if err := json.Unmarshal(conf, &top); err != nil {
			return nil, fmt.Errorf("[accounting.priority]: %v: %w", err, syscall.EINVAL)
		}
	}
	var c mfConfig
	c.defaults()
	if len(top.Accounting.Priority) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(top.Accounting.Priority)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("[accounting.priority]: %v (keys: fairshare-weight, age-weight, size-weight, queue-weight, urgency-weight, age-max, size-max-cores, queues, interval): %w", err, syscall.EINVAL)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return func() {
		changed := c.interval != p.cfg.interval
		p.cfg = c
		if changed && p.h != nil {
			p.arm()
		}
		if p.h != nil {
			p.reprioritizeAll()
		}
	}, nil
}

// JobState implements jobtap.StateHook: it keeps the set of pending jobs.
func (p *MFPriority) JobState(j *jobtap.Job, _ jobtap.State) {
	if j.State == jobtap.StatePriority || j.State == jobtap.StateSched {
		p.pending[j.ID] = struct{}{}
	} else {
		delete(p.pending, j.ID)
	}
}

func (p *MFPriority) reprioritizeAll() {
	for id := range p.pending {
		p.h.Reprioritize(id)
	}
}

// Factor and Explanation are the explain method's answer (the wire
// contract lives with the accounting service's).
type (
	Factor      = accounting.PriorityFactor
	Explanation = accounting.PriorityExplanation
)

// explain computes a job's priority and its terms.
func (p *MFPriority) explain(j *jobtap.Job) Explanation {
	e := Explanation{ID: j.ID, Priority: j.Priority, FairShareTime: p.fsTime}
	cores := 1
	if js := j.Jobspec; js != nil {
		if v, ok := js.Attribute("system.bank"); ok {
			e.Bank, _ = v.(string)
		}
		e.Queue = js.Queue()
		if n := js.NSlots() * js.CoresPerSlot(); n > 0 {
			cores = n
		}
	}
	age := p.now().Sub(time.Unix(0, int64(j.TSubmit*1e9))).Seconds() / p.cfg.ageMax.Seconds()
	age = math.Max(0, math.Min(age, 1))
	terms := []Factor{
		{Name: "fairshare", Value: p.fs[accounting.AssocKey{Userid: j.Userid, Bank: e.Bank}], Weight: p.cfg.FairshareWeight},
		{Name: "age", Value: age, Weight: p.cfg.AgeWeight},
		{Name: "size", Value: math.Min(float64(cores)/float64(p.cfg.SizeMaxCores), 1), Weight: p.cfg.SizeWeight},
		{Name: "queue", Value: p.cfg.Queues[e.Queue], Weight: p.cfg.QueueWeight},
		{Name: "urgency", Value: float64(j.Urgency - jobtap.UrgencyDefault), Weight: p.cfg.UrgencyWeight},
	}
	sum := 0.0
	for i := range terms {
		terms[i].Contribution = terms[i].Value * terms[i].Weight
		sum += terms[i].Contribution
	}
	e.Factors = terms
	switch j.Urgency {
	case jobtap.UrgencyHold:
		e.Computed, e.Note = jobtap.PriorityMin, "held (urgency 0)"
	case jobtap.UrgencyExpedite:
		e.Computed, e.Note = jobtap.PriorityMax, "expedited (urgency 31)"
	default:
		e.Computed = int64(math.Round(math.Max(1, math.Min(sum, jobtap.PriorityMax-1))))
	}
	return e
}

// Priority implements jobtap.PriorityHook.
func (p *MFPriority) Priority(j *jobtap.Job) (int64, bool) {
	return p.explain(j).Computed, true
}

// Methods implements jobtap.Servicer.
func (p *MFPriority) Methods() []jobtap.Method {
	return []jobtap.Method{
		{Topic: "mf-priority.update", Handler: p.update},
		{Topic: "mf-priority.explain", Handler: p.explainMethod, Operators: true},
	}
}

func (p *MFPriority) update(payload json.RawMessage, _ uint32, owner bool) (any, error) {
	if !owner {
		return nil, fmt.Errorf("only the instance owner may send fair-share factors: %w", syscall.EPERM)
	}
	var u accounting.FairShareUpdate
	if err := json.Unmarshal(payload, &u); err != nil {
		return nil, fmt.Errorf("mf-priority.update: %v: %w", err, syscall.EPROTO)
	}
	fs := make(map[accounting.AssocKey]float64, len(u.Entries))
	for _, e := range u.Entries {
		fs[accounting.AssocKey{Userid: e.Userid, Bank: e.Bank}] = e.Factor
	}
	p.fs, p.fsTime = fs, u.Time
	p.reprioritizeAll()
	return nil, nil
}

func (p *MFPriority) explainMethod(payload json.RawMessage, userid uint32, owner bool) (any, error) {
	var req accounting.PriorityExplainRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("mf-priority.explain: %v: %w", err, syscall.EPROTO)
	}
	j, ok := p.h.Job(req.ID)
	if !ok {
		return nil, fmt.Errorf("unknown job id: %w", syscall.ENOENT)
	}
	if !owner && j.Userid != userid {
		return nil, fmt.Errorf("the job is another user's: only its user, operators and the instance owner may ask: %w", syscall.EPERM)
	}
	e := p.explain(j)
	if j.State != jobtap.StatePriority && j.State != jobtap.StateSched {
		e.Note = strings.TrimPrefix(e.Note+"; no longer pending: the factors are today's, the priority its last", "; ")
	}
	return e, nil
}
