package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// Caller is who a request acts for: the user a token was issued to.
type Caller struct {
	Userid uint32
	// Owner: the caller is the instance owner, who sees and may cancel
	// every job (job-manager's and job-list's rule).
	Owner bool
	// Operator: the caller is an operator ([access] operators), who may
	// too; requests carry the operator role, which the instance checks.
	Operator bool
}

// all reports whether the caller sees and acts on every user's jobs.
func (c Caller) all() bool { return c.Owner || c.Operator }

// Record is one job as job-list gives it, numbers kept exact
// (json.Number), plus its decoded form for the fields the server reads.
type Record struct {
	Raw  map[string]any
	Info *job.Info
}

// Nodes is the instance's nodes by state. The sets overlap: a drained
// node is also down, an allocated one also up.
type Nodes struct {
	All, Up, Down, Drained, Offline, Allocated []string
}

// JobStats is job-list.job-stats: counts by state, for all jobs and for
// each named queue, and results of inactive jobs.
type JobStats struct {
	JobStates      map[string]int `json:"job_states"`
	Successful     int            `json:"successful"`
	Failed         int            `json:"failed"`
	Canceled       int            `json:"canceled"`
	Timeout        int            `json:"timeout"`
	InactivePurged int            `json:"inactive_purged"`
	Queues         []QueueStats   `json:"queues"`
}

// QueueStats is one queue's entry in JobStats.
type QueueStats struct {
	Name           string         `json:"name"`
	JobStates      map[string]int `json:"job_states"`
	InactivePurged int            `json:"inactive_purged"`
}

// Instance is what the server needs of a Flux instance. Each method that
// takes a Caller acts with that user's credentials, so the instance's
// own checks apply too. Policy (who may see what) is the server's; an
// Instance only fetches.
type Instance interface {
	// Jobs lists jobs, most relevant first (job-list's order); userid
	// nil: every user's.
	Jobs(ctx context.Context, as Caller, userid *uint32, max int) ([]Record, error)
	// Job returns one job (an error wrapping ENOENT if unknown).
	Job(ctx context.Context, as Caller, id jobid.ID) (Record, error)
	Submit(ctx context.Context, as Caller, spec *jobspec.Jobspec) (jobid.ID, error)
	Cancel(ctx context.Context, as Caller, id jobid.ID) error
	// Output returns the job's output so far, one entry per data event.
	Output(ctx context.Context, as Caller, id jobid.ID) ([]string, error)
	Nodes(ctx context.Context) (Nodes, error)
	JobStats(ctx context.Context) (JobStats, error)
}

// Client is the Instance of a flux.Handle. When the handle's user is the
// instance owner, requests carry the caller's credentials (the broker
// lets the owner's connections set them, as flux-core does); otherwise
// the broker stamps the handle's own, and the server only serves tokens
// of that user.
type Client struct {
	h *flux.Handle
	// Dial opens another connection to the same instance, for the
	// jobs stream's journal subscription (nil: /v1/jobs/events is
	// unavailable).
	Dial func() (*flux.Handle, error)
}

var _ Instance = (*Client)(nil)

// NewClient returns the Instance of h.
func NewClient(h *flux.Handle) *Client { return &Client{h: h} }

// rpc sends topic with payload as caller and returns the response.
func (c *Client) rpc(ctx context.Context, as Caller, topic string, payload any) (*flux.Message, error) {
	f, err := c.send(as, topic, payload, 0)
	if err != nil {
		return nil, err
	}
	return f.Get(ctx)
}

// send sends a request as caller as, with flags (flux.Streaming).
func (c *Client) send(as Caller, topic string, payload any, flags uint8) (*flux.Future, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	m := message.NewRequest(topic, flux.NodeidAny, nil)
	m.SetPayload(append(b, 0))
	m.Flags |= message.FlagPayload
	m.Userid = as.Userid
	m.Rolemask = message.RoleUser
	switch {
	case as.Owner:
		m.Rolemask = message.RoleOwner
	case as.Operator:
		m.Rolemask = message.RoleUser | message.RoleOperator
	}
	return c.h.SendRequest(m, flags)
}

// decodeRecord reads one job object of job-list.
func decodeRecord(b []byte) (Record, error) {
	info, err := job.DecodeJob(b)
	if err != nil {
		return Record{}, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil {
		return Record{}, err
	}
	return Record{Raw: raw, Info: info}, nil
}

func (c *Client) Jobs(ctx context.Context, as Caller, userid *uint32, max int) ([]Record, error) {
	req := job.ListRequest{MaxEntries: max, Attrs: []string{"all"}}
	if userid != nil {
		req.Constraint = map[string]any{"userid": []uint32{*userid}}
	}
	m, err := c.rpc(ctx, as, "job-list.list", req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(m.JSON(), &resp); err != nil {
		return nil, fmt.Errorf("job-list.list response: %w", err)
	}
	out := make([]Record, 0, len(resp.Jobs))
	for _, b := range resp.Jobs {
		r, err := decodeRecord(b)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (c *Client) Job(ctx context.Context, as Caller, id jobid.ID) (Record, error) {
	m, err := c.rpc(ctx, as, "job-list.list-id", map[string]any{"id": id, "attrs": []string{"all"}})
	if err != nil {
		return Record{}, err
	}
	var resp struct {
		Job json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal(m.JSON(), &resp); err != nil {
		return Record{}, fmt.Errorf("job-list.list-id response: %w", err)
	}
	return decodeRecord(resp.Job)
}

func (c *Client) Submit(ctx context.Context, as Caller, spec *jobspec.Jobspec) (jobid.ID, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	req := map[string]any{"J": sign.Wrap(b, as.Userid), "urgency": job.UrgencyDefault, "flags": 0}
	m, err := c.rpc(ctx, as, "job-ingest.submit", req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		ID jobid.ID `json:"id"`
	}
	if err := json.Unmarshal(m.JSON(), &resp); err != nil {
		return 0, fmt.Errorf("job-ingest.submit response: %w", err)
	}
	return resp.ID, nil
}

func (c *Client) Cancel(ctx context.Context, as Caller, id jobid.ID) error {
	_, err := c.rpc(ctx, as, "job-manager.raise", job.RaiseRequest{ID: id, Type: "cancel", Severity: 0, Note: "canceled through flux web"})
	return err
}

func (c *Client) Output(ctx context.Context, as Caller, id jobid.ID) ([]string, error) {
	m, err := c.rpc(ctx, as, "job-info.lookup", map[string]any{"id": id, "keys": []string{"guest.output"}, "flags": 0})
	if err != nil {
		return nil, err
	}
	var resp struct {
		Output string `json:"guest.output"`
	}
	if err := json.Unmarshal(m.JSON(), &resp); err != nil {
		return nil, fmt.Errorf("job-info.lookup response: %w", err)
	}
	evs, err := eventlog.Parse([]byte(resp.Output))
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, ev := range evs {
		if ev.Name != "data" {
			continue
		}
		o, err := job.DecodeOutput(ev.Context)
		if err != nil {
			return nil, err
		}
		b, err := o.Bytes()
		if err != nil {
			return nil, err
		}
		if len(b) > 0 {
			lines = append(lines, string(b))
		}
	}
	return lines, nil
}

func (c *Client) Nodes(ctx context.Context) (Nodes, error) {
	ss, err := resource.GetSchedStatus(ctx, c.h)
	if err != nil {
		return Nodes{}, err
	}
	st, err := resource.GetStatus(ctx, c.h)
	if err != nil {
		return Nodes{}, err
	}
	all := ss.All
	names := func(ranks idset.Set) []string {
		out := []string{}
		for r := range ranks.All() {
			if h, ok := all.Host(r); ok {
				out = append(out, h)
			} else {
				out = append(out, strconv.FormatUint(uint64(r), 10))
			}
		}
		return out
	}
	return Nodes{
		All:       names(all.Ranks()),
		Up:        names(ss.Up().Ranks()),
		Down:      names(ss.Down.Ranks()),
		Allocated: names(ss.Allocated.Ranks()),
		Drained:   names(st.Drained()),
		Offline:   names(st.Offline),
	}, nil
}

func (c *Client) JobStats(ctx context.Context) (JobStats, error) {
	var s JobStats
	err := c.h.Call(ctx, "job-list.job-stats", flux.NodeidAny, nil, &s)
	if err != nil && flux.ErrnoOf(err) == syscall.ENOSYS {
		return s, fmt.Errorf("job-list is not loaded: %w", err)
	}
	return s, err
}
