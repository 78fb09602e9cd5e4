package bothways

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// recorder is a scheduler ("sched") and an executor ("testexec") that
// write down what the job manager asks of them and grant it at once.
type recorder struct {
	attached bool // say "attached": true at sched-ready and exec-hello
	allocs   *collector[wire.AllocRequest]
	starts   *collector[wire.ExecStart]
	failed   *collector[error] // saying hello to the job manager
}

const testR = `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"starttime":0,"expiration":0}}`

func newRecorder(attached bool) *recorder {
	return &recorder{attached: attached, allocs: newCollector[wire.AllocRequest](), starts: newCollector[wire.ExecStart](), failed: newCollector[error]()}
}

func (*recorder) Name() string { return "sched" }

// Run serves as a module (the broker registered "sched"; testexec is
// registered here) or, given a socket handle, as a client.
func (rec *recorder) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("sched.alloc", func(r *flux.Request) {
		att, _ := r.Msg.Attached.(wire.AttachedJobspec)
		req, err := wire.DecodeAllocRequest(r.Msg.JSON(), att)
		if err != nil {
			r.RespondError(err)
			return
		}
		req.Jobspec = slices.Clone(req.Jobspec) // it aliases the message
		rec.allocs.add(req)
		r.RespondRaw(wire.AppendAllocSuccess(nil, req.ID, func(b []byte) []byte { return append(b, testR...) }, "rank0/core0"))
	})
	h.HandleFunc("sched.free", func(r *flux.Request) { r.RespondRaw(nil) })
	h.HandleFunc("sched.cancel", func(r *flux.Request) {})
	h.HandleFunc("sched.prioritize", func(r *flux.Request) {})
	h.HandleFunc("testexec.start", func(r *flux.Request) {
		st, err := wire.DecodeExecStart(r.Msg.JSON())
		if err != nil {
			r.RespondError(err)
			return
		}
		if att, ok := r.Msg.Attached.(wire.AttachedJobspec); ok && st.Jobspec == nil {
			st.Jobspec = []byte(att)
		}
		st.Jobspec, st.R = slices.Clone(st.Jobspec), slices.Clone(st.R)
		rec.starts.add(st)
		r.Respond(map[string]any{"id": st.ID, "type": "start", "data": map[string]any{}})
		r.Respond(map[string]any{"id": st.ID, "type": "finish", "data": map[string]any{"status": 0}})
		r.Respond(map[string]any{"id": st.ID, "type": "release", "data": map[string]any{"ranks": "all", "final": true}})
	})
	h.HandleFunc("testexec.kill", func(r *flux.Request) {})
	errs := make(chan error, 1)
	go func() {
		errs <- func() error {
			if err := h.RegisterService(ctx, "testexec"); err != nil {
				return err
			}
			if err := h.Call(ctx, "job-manager.sched-hello", flux.NodeidAny, nil, nil); err != nil {
				return err
			}
			if err := h.Call(ctx, "job-manager.sched-ready", flux.NodeidAny, map[string]any{"mode": "unlimited", "attached": rec.attached}, nil); err != nil {
				return err
			}
			return h.Call(ctx, "job-manager.exec-hello", flux.NodeidAny, map[string]any{"service": "testexec", "attached": rec.attached}, nil)
		}()
	}()
	go func() {
		if err := <-errs; err != nil && ctx.Err() == nil {
			rec.failed.add(err)
		}
	}()
	return h.Serve(ctx)
}

// TestAllocAndExecStart: the job manager's sched.alloc and
// job-exec.start requests (jobspec attached for a receiver in the broker
// that asks for it) reach a scheduler and an executor with the same
// content in the broker and over a socket.
func TestAllocAndExecStart(t *testing.T) {
	ways := []struct {
		name              string
		inBroker, attachd bool
	}{
		{"in-broker, attached", true, true},
		{"socket, attached asked (the broker writes it out)", false, true},
		{"socket, in the payload", false, false},
	}
	spec, err := jobspec.FromCommand([]string{"hostname", "-s"}, jobspec.CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, way := range ways {
		c := ctx(t)
		rec := newRecorder(way.attachd)
		leave := []string{"sched-simple", "job-exec", "job-shell"}
		var sock *flux.Handle
		if way.inBroker {
			_, sock = instance(t, leave, map[string]module.Factory{"sched": func() module.Module { return rec }})
		} else {
			inst, s := instance(t, leave, nil)
			sock = s
			h := inst.Handle(0)
			if err := h.RegisterService(c, "sched"); err != nil {
				t.Fatal(err)
			}
			sctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go rec.Run(sctx, h, nil)
		}
		id, err := job.Submit(c, sock, spec)
		if err != nil {
			t.Fatalf("%s: submit: %v", way.name, err)
		}
		res, err := job.WaitResult(c, sock, id)
		if err != nil {
			t.Fatalf("%s: %v", way.name, err)
		}
		if res.ExceptionOccurred || res.Waitstatus == nil || *res.Waitstatus != 0 {
			t.Errorf("%s: the job did not succeed: %+v", way.name, res)
		}
		if errs := rec.failed.wait(t, c, "", func([]error) bool { return true }); len(errs) > 0 {
			t.Fatalf("%s: %v", way.name, errs)
		}
		a := rec.allocs.wait(t, c, way.name+": sched.alloc", func(l []wire.AllocRequest) bool { return len(l) > 0 })
		s := rec.starts.wait(t, c, way.name+": job-exec.start", func(l []wire.ExecStart) bool { return len(l) > 0 })
		if len(a) != 1 || len(s) != 1 || a[0].ID != id || s[0].ID != id {
			t.Fatalf("%s: job %s: %d alloc requests, %d start requests", way.name, id, len(a), len(s))
		}
		if len(a[0].Jobspec) == 0 || len(s[0].Jobspec) == 0 {
			t.Errorf("%s: no jobspec reached the scheduler (%d bytes) or the executor (%d bytes)", way.name, len(a[0].Jobspec), len(s[0].Jobspec))
		}
		got = append(got, []string{
			fmt.Sprintf("alloc userid=%d priority=%d t_submit_set=%v", a[0].Userid, a[0].Priority, a[0].TSubmit > 0),
			"alloc jobspec " + string(a[0].Jobspec),
			fmt.Sprintf("start userid=%d flags=%d reattach=%v", s[0].Userid, s[0].Flags, s[0].Reattach),
			"start R " + string(s[0].R),
			"start jobspec " + string(s[0].Jobspec),
		})
	}
	for i := 1; i < len(got); i++ {
		if !slices.Equal(got[0], got[i]) {
			t.Errorf("the requests differ (%s -, %s +):%s", ways[0].name, ways[i].name, diffLines(got[0], got[i]))
		}
	}
}
