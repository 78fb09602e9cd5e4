package cli

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// TestStartServer: the start server of flux start --test-size signals,
// waits for and starts again the processes of each rank (real processes
// and a real socket, as startctl drives them).
func TestStartServer(t *testing.T) {
	launches := 0
	procs := newStartProcs(2, func(rank int) (*exec.Cmd, error) {
		launches++
		cmd := exec.Command("sleep", "30")
		return cmd, cmd.Start()
	})
	path := filepath.Join(t.TempDir(), "start")
	ln, err := procs.serveStart(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for rank := 0; rank < 2; rank++ {
		if err := procs.start(rank); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		procs.signal(syscall.SIGKILL, true)
		procs.waitAll()
	}()
	h, err := flux.Open("local://" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var st struct {
		Procs []struct {
			Pid int `json:"pid"`
		} `json:"procs"`
	}
	if err := h.Call(ctx, "start.status", 0, nil, &st); err != nil || len(st.Procs) != 2 || st.Procs[1].Pid <= 0 {
		t.Fatalf("start.status: %+v, %v", st, err)
	}
	if err := h.Call(ctx, "start.kill", 0, map[string]int{"rank": 1, "signum": 15}, nil); err != nil {
		t.Fatalf("start.kill: %v", err)
	}
	var w struct {
		ExitRC int `json:"exit_rc"`
	}
	if err := h.Call(ctx, "start.wait", 0, map[string]int{"rank": 1}, &w); err != nil || w.ExitRC != 143 {
		t.Fatalf("start.wait: %+v, %v; want exit_rc 143", w, err)
	}
	if err := h.Call(ctx, "start.run", 0, map[string]int{"rank": 1}, nil); err != nil || launches != 3 {
		t.Fatalf("start.run: %v (%d launches)", err, launches)
	}
	err = h.Call(ctx, "start.run", 0, map[string]int{"rank": 1}, nil)
	if !errors.Is(err, syscall.EEXIST) {
		t.Errorf("start.run of a running rank: %v, want EEXIST", err)
	}
	err = h.Call(ctx, "start.kill", 0, map[string]int{"rank": 7, "signum": 15}, nil)
	if !errors.Is(err, syscall.ESRCH) {
		t.Errorf("start.kill of rank 7: %v, want ESRCH", err)
	}
	err = h.Call(ctx, "start.kill", 0, map[string]any{"signum": 15}, nil)
	if !errors.Is(err, syscall.EPROTO) {
		t.Errorf("start.kill without rank: %v, want EPROTO", err)
	}
}
