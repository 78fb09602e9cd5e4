package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/modules"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// BenchmarkPipeline runs the whole job pipeline in-process: a one-broker
// instance with the rc1 modules and the 16,384 × 64 fake inventory, b.N
// one-core test-executor jobs (1 ms) submitted with 4096 in flight
// through a local connector client, until the last clean event. Its
// allocs/op and B/op are per job and count the broker and the client
// together: unlike times, they do not depend on what else the machine
// is doing.
func BenchmarkPipeline(b *testing.B) {
	inst := brokertest.Start(b, brokertest.Options{
		Size:     1,
		Registry: modules.Registry(),
		Modules:  modules.DefaultRC1(),
		Attrs: map[string]string{
			"resource.config":           fmt.Sprintf(`[{"hosts":"node[0-%d]","cores":"0-%d"}]`, nodes-1, cores-1),
			"resource.monitor-force-up": "1",
		},
	})
	h := inst.Handle(0)
	ctx := context.Background()
	if err := waitSchedReady(ctx, h); err != nil {
		b.Fatal(err)
	}
	payload := submitPayload(b)
	journal, err := h.RPC("job-manager.events-journal", flux.NodeidAny, json.RawMessage(`{"allow":{"clean":1}}`), flux.Streaming)
	if err != nil {
		b.Fatal(err)
	}
	cleaned := make(chan time.Time, 1)
	go followJournal(journal, b.N, cleaned, nil, nil)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if _, err := submit(ctx, h, payload, b.N, 4096); err != nil {
		b.Fatal(err)
	}
	select {
	case end := <-cleaned:
		b.ReportMetric(float64(b.N)/end.Sub(start).Seconds(), "jobs/s")
	case <-time.After(10 * time.Minute):
		b.Fatal("jobs did not finish")
	}
}

// submitPayload is the job-ingest.submit payload of the jobspec flux
// submit makes for a one-core test job in this environment.
func submitPayload(b *testing.B) []byte {
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		b.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	js.SetEnvironment(env)
	wd, _ := os.Getwd()
	js.SetCwd(wd)
	if err := js.SetAttribute("system.exec.test.run_duration", "0.001s"); err != nil {
		b.Fatal(err)
	}
	raw, err := js.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"J":` + strconv.Quote(sign.Wrap(raw, uint32(os.Getuid()))) + `,"urgency":16,"flags":0}`)
	return buf.Bytes()
}
