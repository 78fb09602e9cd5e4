package rexec_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/modules/rexec/rexectest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
)

func execReq(flags int, args ...string) subprocess.ExecRequest {
	return subprocess.ExecRequest{
		Cmd: subprocess.CommandObject{
			Cmdline: args, Env: map[string]string{}, Opts: map[string]string{}, Channels: []string{},
		},
		Flags: flags,
	}
}

// collect reads an exec stream to its end.
func collect(t *testing.T, ctx context.Context, f *flux.Future) ([]subprocess.Response, error) {
	t.Helper()
	var out []subprocess.Response
	for {
		m, err := f.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		var r subprocess.Response
		if err := m.UnmarshalPayload(&r); err != nil {
			t.Fatalf("bad response %s: %v", m.JSON(), err)
		}
		out = append(out, r)
	}
}

// TestExecStreamShape checks the RFC 42 response sequence: started
// first, output with EOF for each forwarded stream and finished before
// ENODATA.
func TestExecStreamShape(t *testing.T) {
	inst := rexectest.Start(t, 2)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	for _, rank := range []uint32{0, 1} {
		t.Run(fmt.Sprint("rank", rank), func(t *testing.T) {
			req := execReq(subprocess.FlagStdout|subprocess.FlagStderr,
				"sh", "-c", "echo out; echo err >&2; exit 3")
			f, err := h.RPC("rexec.exec", rank, req, flux.Streaming)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := collect(t, ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 || rs[0].Type != "started" || rs[0].Pid <= 0 {
				t.Fatalf("first response is not started: %+v", rs)
			}
			var stdout, stderr strings.Builder
			eofs := map[string]int{}
			var status *int
			for _, r := range rs[1:] {
				switch r.Type {
				case "output":
					if r.Pid != rs[0].Pid || r.IO == nil || r.IO.Rank != fmt.Sprint(rank) {
						t.Fatalf("bad output response %+v", r)
					}
					b, _ := r.IO.Bytes()
					map[string]*strings.Builder{"stdout": &stdout, "stderr": &stderr}[r.IO.Stream].Write(b)
					if r.IO.EOF {
						eofs[r.IO.Stream]++
					}
				case "finished":
					status = r.Status
				default:
					t.Fatalf("unexpected response %+v", r)
				}
			}
			if stdout.String() != "out\n" || stderr.String() != "err\n" {
				t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
			}
			if eofs["stdout"] != 1 || eofs["stderr"] != 1 {
				t.Fatalf("eofs %v, want one per stream", eofs)
			}
			if status == nil || subprocess.Status(*status).ExitStatus() != 3 {
				t.Fatalf("finished status %v, want exit 3", status)
			}
		})
	}
}

func TestExecUnforwardedStreams(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	f, err := h.RPC("rexec.exec", 0, execReq(subprocess.FlagStdout, "sh", "-c", "echo out; echo err >&2"), flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := collect(t, ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Type == "output" && r.IO.Stream != "stdout" {
			t.Fatalf("stderr was not asked for: %+v", r)
		}
	}
}

func TestExecErrors(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	tests := []struct {
		name  string
		req   subprocess.ExecRequest
		errno syscall.Errno
	}{
		{"no such command", execReq(0, "/nonexistent/fluxgo-cmd"), syscall.ENOENT},
		{"not in PATH", execReq(0, "fluxgo-no-such-command"), syscall.ENOENT},
		{"empty cmdline", execReq(0), syscall.EPROTO},
		{"bad cwd", func() subprocess.ExecRequest {
			r := execReq(0, "true")
			r.Cmd.Cwd = "/nonexistent/dir"
			return r
		}(), syscall.ENOENT},
		{"waitable", execReq(subprocess.FlagWaitable, "true"), syscall.EINVAL},
		{"channels", func() subprocess.ExecRequest {
			r := execReq(0, "true")
			r.Cmd.Channels = []string{"AUX"}
			return r
		}(), syscall.EINVAL},
		{"bad bufsize", func() subprocess.ExecRequest {
			r := execReq(0, "true")
			r.Cmd.Opts[subprocess.OptStdinBufsize] = "lots"
			return r
		}(), syscall.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := h.RPC("rexec.exec", 0, tc.req, flux.Streaming)
			if err != nil {
				t.Fatal(err)
			}
			_, err = collect(t, ctx, f)
			if !errors.Is(err, tc.errno) {
				t.Fatalf("got %v, want %v", err, tc.errno)
			}
		})
	}
	if err := h.Call(ctx, "rexec.exec", 0, "not json", nil); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("malformed request: %v", err)
	}
}

// TestNotOwner sends every request with a guest's credentials (the
// owner may forge them, as in flux-core): all are refused with EPERM.
func TestNotOwner(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	for _, topic := range []string{"rexec.exec", "rexec.kill", "rexec.list"} {
		m := message.NewRequest(topic, 0, nil)
		var payload any = map[string]any{}
		switch topic {
		case "rexec.exec":
			payload = execReq(0, "true")
		case "rexec.kill":
			payload = subprocess.KillRequest{Pid: 1, Signum: 0}
		}
		if err := m.MarshalPayload(payload); err != nil {
			t.Fatal(err)
		}
		m.Userid, m.Rolemask = 4242, message.RoleUser
		f, err := h.SendRequest(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Get(ctx); !errors.Is(err, syscall.EPERM) {
			t.Errorf("%s as guest: got %v, want EPERM", topic, err)
		}
	}
}

// TestOutputIsStreamed reads output of a process that is still running.
func TestOutputIsStreamed(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	f, err := h.RPC("rexec.exec", 0, execReq(subprocess.FlagStdout, "sh", "-c", "echo first; exec sleep 30"), flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var r subprocess.Response
		m.UnmarshalPayload(&r)
		if r.Type == "started" {
			pid = r.Pid
		}
		if r.Type == "output" && r.IO.Data == "first\n" {
			break
		}
		if r.Type == "finished" {
			t.Fatal("process finished before its output arrived")
		}
	}
	if err := h.Call(ctx, "rexec.kill", 0, subprocess.KillRequest{Pid: pid, Signum: int(syscall.SIGTERM)}, nil); err != nil {
		t.Fatal(err)
	}
	rs, err := collect(t, ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	last := rs[len(rs)-1]
	for _, r := range rs {
		if r.Type == "finished" {
			last = r
		}
	}
	if last.Status == nil || !subprocess.Status(*last.Status).Signaled() || subprocess.Status(*last.Status).Signal() != syscall.SIGTERM {
		t.Fatalf("want killed by SIGTERM, got %+v", last)
	}
}

func TestKillAndList(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	req := execReq(0, "sleep", "30")
	req.Cmd.Label = "napper"
	f, err := h.RPC("rexec.exec", 0, req, flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var started subprocess.Response
	m.UnmarshalPayload(&started)

	var list subprocess.ListResponse
	if err := h.Call(ctx, "rexec.list", 0, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Procs) != 1 || list.Procs[0].Pid != started.Pid || list.Procs[0].Cmd != "sleep" ||
		list.Procs[0].Label != "napper" || list.Procs[0].State != "R" {
		t.Fatalf("list: %+v", list)
	}
	// A second process with the same label is refused.
	dup, _ := h.RPC("rexec.exec", 0, req, flux.Streaming)
	if _, err := collect(t, ctx, dup); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("duplicate label: %v", err)
	}
	if err := h.Call(ctx, "rexec.kill", 0, subprocess.KillRequest{Pid: 999999999, Signum: 9}, nil); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill unknown pid: %v", err)
	}
	if err := h.Call(ctx, "rexec.kill", 0, subprocess.KillRequest{Label: "napper", Signum: 9}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := h.Call(ctx, "rexec.list", 0, nil, &list); err != nil || len(list.Procs) != 0 {
		t.Fatalf("list after kill: %+v %v", list, err)
	}
}

// TestStdinCredit writes stdin by hand following the credit protocol.
func TestStdinCredit(t *testing.T) {
	inst := rexectest.Start(t, 1, "stdin-bufsize=1000")
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	f, err := h.RPC("rexec.exec", 0, execReq(subprocess.FlagStdout|subprocess.FlagWriteCredit, "cat"), flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r subprocess.Response
	m.UnmarshalPayload(&r)
	if r.Type != "add-credit" || r.Channels["stdin"] != 1000 {
		t.Fatalf("first response %+v, want add-credit of 1000", r)
	}
	h.RPC("rexec.write", 0, subprocess.WriteRequest{Matchtag: f.Matchtag(),
		IO: subprocess.EncodeIO("stdin", "0", []byte("hello\xff\n"), true)}, flux.NoResponse)
	rs, err := collect(t, ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	credit := 0
	for _, r := range rs {
		if r.Type == "output" {
			b, _ := r.IO.Bytes()
			got = append(got, b...)
		}
		if r.Type == "add-credit" {
			credit += r.Channels["stdin"]
		}
	}
	if string(got) != "hello\xff\n" || credit != 7 {
		t.Fatalf("got %q (credit back %d)", got, credit)
	}
}

// TestDisconnectKills checks a client's processes die with it, on its
// own broker and on another.
func TestDisconnectKills(t *testing.T) {
	inst := rexectest.Start(t, 2)
	ctx := rexectest.Context(t)
	for _, rank := range []uint32{0, 1} {
		h, err := flux.Open(inst.URI(0))
		if err != nil {
			t.Fatal(err)
		}
		f, err := h.RPC("rexec.exec", rank, execReq(0, "sleep", "60"), flux.Streaming)
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var r subprocess.Response
		m.UnmarshalPayload(&r)
		h.Close()
		waitGone(t, r.Pid)
	}
}

// TestUnloadKills checks removing the module kills everything it runs,
// background processes and children that left the process group's
// leader behind included.
func TestUnloadKills(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	f, err := h.RPC("rexec.exec", 0, execReq(subprocess.FlagStdout, "sh", "-c", "sleep 60 & echo $!; wait"), flux.Streaming)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for len(pids) < 2 {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var r subprocess.Response
		m.UnmarshalPayload(&r)
		switch r.Type {
		case "started":
			pids = append(pids, r.Pid)
		case "output":
			var pid int
			fmt.Sscan(r.IO.Data, &pid)
			pids = append(pids, pid)
		}
	}
	var bg subprocess.StartedResponse
	if err := h.Call(ctx, "rexec.exec", 0, execReq(0, "sleep", "60"), &bg); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, bg.Pid)
	if err := h.Call(ctx, "module.remove", 0, map[string]string{"name": "rexec"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
	// The stream ended (with the finished response, or ENOSYS from the
	// unloaded module): it does not hang.
	if _, err := collect(t, ctx, f); err != nil && !errors.Is(err, syscall.ENOSYS) {
		t.Fatal(err)
	}
}

func TestBackground(t *testing.T) {
	inst := rexectest.Start(t, 1)
	h := inst.Handle(0)
	ctx := rexectest.Context(t)
	var r subprocess.StartedResponse
	if err := h.Call(ctx, "rexec.exec", 0, execReq(0, "sleep", "60"), &r); err != nil {
		t.Fatal(err)
	}
	if r.Type != "started" || r.Pid <= 0 {
		t.Fatalf("response %+v", r)
	}
	var list subprocess.ListResponse
	if err := h.Call(ctx, "rexec.list", 0, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Procs) != 1 || !list.Procs[0].Bg {
		t.Fatalf("list %+v", list)
	}
	if err := h.Call(ctx, "rexec.kill", 0, subprocess.KillRequest{Pid: r.Pid, Signum: 9}, nil); err != nil {
		t.Fatal(err)
	}
	waitGone(t, r.Pid)
}

// waitGone waits until pid no longer runs: it does not exist, or it is
// a zombie (an orphan whose reaper is slow, or a container's init that
// never reaps).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !running(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d still running", pid)
}

func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
