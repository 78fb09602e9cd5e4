package jobmanager

import (
	"errors"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"io"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// execClient speaks RFC 32 to the execution service that said
// job-manager.exec-hello.
type execClient struct {
	m       *manager
	service string
	topic   string // service + ".start"
	route   string
	// attached: the executor said at exec-hello that it runs in this
	// broker and takes start requests' jobspecs attached
	// (wire.AttachedJobspec); any other gets them in the payload
	attached bool
	futures  map[jobid.ID]*flux.Future
}

func newExecClient(m *manager) *execClient {
	return &execClient{m: m, futures: make(map[jobid.ID]*flux.Future)}
}

func (e *execClient) hello(r *flux.Request) {
	var req struct {
		Service  string `json:"service"`
		Attached bool   `json:"attached"` // fluxgo: see execClient
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
	e.service, e.attached = req.Service, req.Attached
	e.topic = ""
	e.route = r.Msg.RouteString()
	r.Respond(map[string]any{"generation": e.m.generation})
	// jobs waiting for an executor can start now; restored running jobs
	// are reattached
	for _, j := range e.m.jobs {
		switch {
		case j.reattach && e.futures[j.ID] == nil:
			e.send(j, true)
		case j.State == jobtap.StateRun && j.startSent && !j.started && e.futures[j.ID] == nil:
			e.start(j)
		}
	}
}

func (e *execClient) start(j *job) { e.send(j, false) }

// send sends the job's job-exec.start request (with reattach: to take
// over a job that runs already).
func (e *execClient) send(j *job, reattach bool) {
	m := e.m
	if e.futures[j.ID] != nil {
		return // already started (exec-hello and the commit callback can race)
	}
	if e.service == "" {
		m.log.Debug("no execution service yet; job waits", "id", j.ID.String())
		return
	}
	// {"R","flags","id","jobspec","userid"}, the jobspec attached
	// instead for an executor in this broker
	st := wire.ExecStart{ID: j.ID, Userid: j.Userid, Flags: j.Flags, R: j.R, Reattach: reattach}
	size := 96 + len(j.R)
	if !e.attached {
		st.Jobspec = j.Raw
		if st.Jobspec == nil {
			st.Jobspec = []byte{} // written as null
		}
		size += len(j.Raw)
	}
	b := wire.AppendExecStart(make([]byte, 0, size), st)
	if e.topic == "" {
		e.topic = e.service + ".start"
	}
	req := message.NewRequest(e.topic, flux.NodeidAny, nil)
	req.SetJSONBuffer(b)
	if e.attached {
		req.Attached = wire.AttachedJobspec(j.Raw)
	}
	f, err := m.h.SendRequest(req, flux.Streaming)
	if err != nil {
		m.post(j, "exception", map[string]any{"type": "exec", "severity": 0, "note": err.Error(), "userid": m.owner})
		return
	}
	e.futures[j.ID] = f
	f.Then(func(msg *flux.Message, err error) { e.response(j, f, msg, err) })
	if j.Flags&fluxjob.FlagDebug != 0 {
		// flux-core's test hooks
		name := "debug.start-request"
		if reattach {
			name = "debug.exec-reattach-start"
		}
		m.post(j, name, nil)
	}
}

func (e *execClient) response(j *job, f *flux.Future, msg *flux.Message, err error) {
	m := e.m
	if err != nil {
		e.futures = forgetFuture(e.futures, j.ID)
		f.Close()
		if errors.Is(err, syscall.ENODATA) || errors.Is(err, io.EOF) {
			return
		}
		if j.reattach {
			// the executor does not have it (the instance restarted)
			m.endRestarted(j)
			return
		}
		if flux.ErrnoOf(err) == syscall.ENOSYS && j.started && !j.releasedAll {
			// the executor was unloaded under a running job (a module
			// reload, or a shutdown that keeps jobs): its shells run on,
			// and the next executor to say hello takes it back
			m.awaitReattach(j)
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
	var typ string
	var data map[string]any
	err = jsonwire.Object(msg.JSON(), func(key, val []byte) error {
		var err error
		switch string(key) {
		case "type":
			typ, err = jsonwire.String(val)
		case "data":
			if len(val) > 0 && val[0] == '{' {
				data, err = decodeFlatObject(val)
			}
		}
		return err
	})
	if err != nil {
		m.log.Error("bad exec response", "err", err)
		return
	}
	wasReattach := j.reattach
	j.reattach = false
	switch typ {
	case "start":
		if !j.started { // a reattach says it again
			m.post(j, "start", nil)
		}
		if wasReattach && j.Flags&fluxjob.FlagDebug != 0 {
			m.post(j, "debug.exec-reattach-finish", nil)
		}
		if wasReattach && j.requeuing {
			m.cleanup(j, j.State) // killed before the restart? again now
		}
	case "release":
		if final, ok := data["final"].(bool); ok && !final {
			m.partialRelease(j, data) // realloc.go (RFC 51)
			return
		}
		m.post(j, "release", data)
		m.cleanup(j, j.State)
	case "finish":
		if !j.finished {
			m.post(j, "finish", data)
		}
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
	e.m.h.RPC(e.service+".kill", flux.NodeidAny, map[string]any{"id": j.ID, "signum": signum, "fatal": j.fatal || j.requeuing}, flux.NoResponse)
}

func (e *execClient) disconnected(route string) {
	if route == e.route && e.service != "" {
		e.m.log.Info("execution service disconnected", "service", e.service)
		e.service = ""
	}
}
