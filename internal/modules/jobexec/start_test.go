package jobexec

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// TestStartWithoutJobspec: a start request whose jobspec was attached
// in-process loses it on a socket; job-exec refuses it rather than run
// a job it knows nothing of.
func TestStartWithoutJobspec(t *testing.T) {
	fk := modtest.NewKVS()
	reg := module.NewRegistry()
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("job-exec", New)
	inst := brokertest.Start(t, brokertest.Options{Size: 1, Registry: reg,
		Modules: []broker.ModuleSpec{{Name: "kvs"}, {Name: "job-exec"}}})
	h := inst.Handle(0)
	req := map[string]any{"id": 42, "userid": 0, "flags": 0, "R": map[string]any{"version": 1}}
	err := h.Call(brokertest.Ctx(t), "job-exec.start", flux.NodeidAny, req, nil)
	if !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), "no jobspec") {
		t.Fatalf("start without a jobspec: %v", err)
	}
}
