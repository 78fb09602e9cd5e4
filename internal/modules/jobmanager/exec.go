package jobmanager

import (
	"encoding/json"
	"errors"
	"io"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// execClient speaks RFC 32 to the execution service that said
// job-manager.exec-hello.
type execClient struct {
	m       *manager
	service string
	route   string
	futures map[jobid.ID]*flux.Future
}

func newExecClient(m *manager) *execClient {
	return &execClient{m: m, futures: make(map[jobid.ID]*flux.Future)}
}

func (e *execClient) hello(r *flux.Request) {
	var req struct {
		Service string `json:"service"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "exec-hello is only for the instance owner")
		return
	}
	if req.Service == "" {
		r.Errorf(syscall.EINVAL, "exec-hello: service must not be empty")
		return
	}
	e.service = req.Service
	e.route = r.Msg.RouteString()
	r.Respond(nil)
	// jobs waiting for an executor can start now
	for _, j := range e.m.jobs {
		if j.State == jobtap.StateRun && j.startSent && !j.started && e.futures[j.ID] == nil {
			e.start(j)
		}
	}
}

func (e *execClient) start(j *job) {
	m := e.m
	if e.futures[j.ID] != nil {
		return // already started (exec-hello and the commit callback can race)
	}
	if e.service == "" {
		m.log.Debug("no execution service yet; job waits", "id", j.ID.String())
		return
	}
	req := map[string]any{
		"id":      j.ID,
		"userid":  j.Userid,
		"jobspec": j.Raw,
		"R":       j.R,
		"flags":   j.Flags,
	}
	f, err := m.h.RPC(e.service+".start", flux.NodeidAny, req, flux.Streaming)
	if err != nil {
		m.post(j, "exception", map[string]any{"type": "exec", "severity": 0, "note": err.Error(), "userid": m.owner})
		return
	}
	e.futures[j.ID] = f
	f.Then(func(msg *flux.Message, err error) { e.response(j, f, msg, err) })
}

func (e *execClient) response(j *job, f *flux.Future, msg *flux.Message, err error) {
	m := e.m
	if err != nil {
		delete(e.futures, j.ID)
		f.Close()
		if errors.Is(err, syscall.ENODATA) || errors.Is(err, io.EOF) {
			return
		}
		// The executor failed or went away: the job can't be trusted to
		// be running. Raise an exception and account for resources.
		if !j.releasedAll {
			m.post(j, "exception", map[string]any{"type": "exec", "severity": 0, "note": "execution service error: " + err.Error(), "userid": m.owner})
			if !j.finished {
				m.post(j, "finish", map[string]any{"status": 9})
			}
			m.post(j, "release", map[string]any{"ranks": "all", "final": true})
			m.cleanup(j, j.State)
		}
		return
	}
	var resp struct {
		ID   jobid.ID        `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := msg.UnmarshalPayload(&resp); err != nil {
		m.log.Error("bad exec response", "err", err)
		return
	}
	var data map[string]any
	if len(resp.Data) > 0 {
		json.Unmarshal(resp.Data, &data)
	}
	switch resp.Type {
	case "start":
		m.post(j, "start", nil)
	case "release":
		m.post(j, "release", data)
		m.cleanup(j, j.State)
	case "finish":
		m.post(j, "finish", data)
	case "exception":
		ctx := map[string]any{"type": data["type"], "severity": data["severity"], "note": data["note"], "userid": m.owner}
		m.post(j, "exception", ctx)
	}
}

// kill asks the executor to signal a running job.
func (e *execClient) kill(j *job, signum int) {
	if e.service == "" || !j.startSent {
		return
	}
	e.m.h.RPC(e.service+".kill", flux.NodeidAny, map[string]any{"id": j.ID, "signum": signum, "fatal": j.fatal}, flux.NoResponse)
}

func (e *execClient) disconnected(route string) {
	if route == e.route && e.service != "" {
		e.m.log.Info("execution service disconnected", "service", e.service)
		e.service = ""
	}
}
