package jobmanager

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func TestMemo(t *testing.T) {
	e := start(t, false)
	id := e.submit("sleep", 16, nil)
	e.waitEvent(id, "start")
	ctx := brokertest.Ctx(t)
	memo := map[string]any{"id": id, "volatile": false, "memo": map[string]any{"uri": "ssh://host/tmp/x/local"}}
	if err := e.h.Call(ctx, "job-manager.memo", flux.NodeidAny, memo, nil); err != nil {
		t.Fatal(err)
	}
	e.waitEvent(id, "memo")
	dothex, _ := id.Encode("dothex")
	if log := string(e.kvs.Value("job." + dothex + ".eventlog")); !strings.Contains(log, `"name":"memo","context":{"uri":"ssh://host/tmp/x/local"}`) {
		t.Fatalf("eventlog:\n%s", log)
	}
	for _, bad := range []map[string]any{
		{"id": id, "memo": map[string]any{}},
		{"id": id, "memo": "text"},
	} {
		if err := e.h.Call(ctx, "job-manager.memo", flux.NodeidAny, bad, nil); err == nil {
			t.Fatalf("memo %v accepted", bad)
		}
	}
	if err := e.h.Call(ctx, "job-manager.memo", flux.NodeidAny, map[string]any{"id": id + 1, "memo": map[string]any{"a": 1}}, nil); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("memo on an unknown job: %v", err)
	}
}
