package shellproc

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
)

// The hand-written encoders must give what flux-core writes: valid
// eventlog lines, context keys in its order.
func TestEventEncoders(t *testing.T) {
	at := time.Unix(1796013271, 314839400)
	tests := []struct {
		name string
		line []byte
		ev   string
		ctx  string
	}{
		{"data", appendDataEvent(nil, "stdout", 3, []byte("hi \"there\"\n\t\x01é"), false), "data",
			`{"stream":"stdout","rank":"3","data":"hi \"there\"\n\t\u0001é"}`},
		{"eof", appendDataEvent(nil, "stderr", 0, nil, true), "data",
			`{"stream":"stderr","rank":"0","eof":true}`},
		{"binary", appendDataEvent(nil, "stdout", 1, []byte{0xff, 0xfe, '\n'}, false), "data",
			`{"stream":"stdout","rank":"1","data":"//4K","encoding":"base64"}`},
		{"task-exit", appendTaskExit(nil, at, shell.TaskExit{Rank: 5, LocalID: 1, PID: 869, WaitStatus: int(syscall.SIGTERM)}), "shell.task-exit",
			`{"localid":1,"rank":5,"state":"Exited","pid":869,"wait_status":15,"signaled":15,"exitcode":143}`},
		{"shell-exit", appendShellExit(nil, at, 2, 3<<8), "shell-exit", `{"rank":2,"wait_status":768}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := eventlog.Parse(tc.line)
			if err != nil || len(evs) != 1 {
				t.Fatalf("%q: %v", tc.line, err)
			}
			if evs[0].Name != tc.ev || string(evs[0].Context) != tc.ctx {
				t.Fatalf("got %s %s\nwant %s %s", evs[0].Name, evs[0].Context, tc.ev, tc.ctx)
			}
			if !json.Valid(evs[0].Context) {
				t.Fatalf("invalid context %s", evs[0].Context)
			}
		})
	}
	if l := appendShellExit(nil, at, 0, 0); string(l[:len(`{"timestamp":1796013271.3148394,`)]) != `{"timestamp":1796013271.3148394,` {
		t.Fatalf("timestamp format: %s", l)
	}
}
