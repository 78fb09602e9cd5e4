package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestResourceListTranscript prints the resource.sched-status payload of
// the flux-core transcript and compares with what flux-core printed.
func TestResourceListTranscript(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "wire")
	f, err := os.Open(filepath.Join(dir, "resource-list.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var payload json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Dir     string          `json:"dir"`
			Topic   string          `json:"topic"`
			Payload json.RawMessage `json:"payload"`
		}
		json.Unmarshal(sc.Bytes(), &rec)
		if rec.Dir == "broker->client" && rec.Topic == "resource.sched-status" {
			payload = rec.Payload
		}
	}
	if payload == nil {
		t.Fatal("no resource.sched-status response in the transcript")
	}
	want, err := os.ReadFile(filepath.Join(dir, "resource-list.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	wantOut := strings.TrimSuffix(string(want), "rc=0\n")
	ss, err := resource.ParseSchedStatus(payload)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runResourceList(ss, resourceListOptions{format: "default", states: "free,allocated,down"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != wantOut {
		t.Fatalf("got:\n%q\nwant:\n%q", out.String(), wantOut)
	}
}

// schedStatus4 is 4 nodes × 4 cores (node[0-3]; nodes 2-3 with 2 GPUs and
// property "gpu"): node 3 down, rank 0 cores 0-1 and rank 2 core 0 + gpu 0
// allocated.
const schedStatus4 = `{
 "all": {"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-3"}},{"rank":"2-3","children":{"core":"0-3","gpu":"0-1"}}],"nodelist":["node[0-3]"],"properties":{"gpu":"2-3"},"starttime":0,"expiration":0}},
 "down": {"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0-3","gpu":"0-1"}}],"nodelist":["node3"],"properties":{"gpu":"3"},"starttime":0,"expiration":0}},
 "allocated": {"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-1"}},{"rank":"2","children":{"core":"0","gpu":"0"}}],"nodelist":["node[0,2]"],"properties":{"gpu":"2"},"starttime":0,"expiration":0}}
}`

func TestResourceListFormats(t *testing.T) {
	ss, err := resource.ParseSchedStatus([]byte(schedStatus4))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    resourceListOptions
		want string
	}{
		{"default with properties", resourceListOptions{format: "default", states: "free,allocated,down"}, `     STATE PROPERTIES NNODES NCORES NGPUS NODELIST
      free                 2      6     0 node[0-1]
      free gpu             1      3     1 node2
 allocated                 1      2     0 node0
 allocated gpu             1      1     1 node2
      down gpu             1      4     2 node3
`},
		{"custom no header", resourceListOptions{format: "{state} {ranks} {rlist}", states: "up,all", noHeader: true}, `up 0-2 rank[0-1]/core[0-3] rank2/core[0-3],gpu[0-1]
all 0-3 rank[0-1]/core[0-3] rank[2-3]/core[0-3],gpu[0-1]
`},
		{"one field merges states", resourceListOptions{format: "{nnodes}", states: "free,down", noHeader: true}, "4\n"},
		{"include hosts", resourceListOptions{format: "{state} {nodelist}", states: "free", include: "node[1-2],nosuch", noHeader: true}, "free node[1-2]\n"},
		{"include ranks", resourceListOptions{format: "{state} {ncores}", states: "allocated", include: "2", noHeader: true}, "allocated 1\n"},
		{"info", resourceListOptions{format: "{nnodes} Nodes, {ncores} Cores, {ngpus} GPUs", states: "all", noHeader: true}, "4 Nodes, 16 Cores, 4 GPUs\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := runResourceList(ss, tt.o, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out.String(), tt.want)
			}
		})
	}
	var out bytes.Buffer
	if err := runResourceList(ss, resourceListOptions{format: "default", states: "bogus"}, &out); err == nil {
		t.Fatal("accepted state bogus")
	}
	if err := runResourceR(ss, resourceListOptions{states: "down"}, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, `{"version":1,"execution":{"R_lite":[{"rank":"3","children":{"core":"0-3","gpu":"0-1"}}]`) {
		t.Fatalf("R: %s", got)
	}
}

func TestResourceStatusLines(t *testing.T) {
	st, err := resource.ParseStatus([]byte(`{
	 "R": {"version":1,"execution":{"R_lite":[{"rank":"0-4","children":{"core":"0-3"}}],"nodelist":["node[0-4]"],"starttime":0,"expiration":0}},
	 "online": "0-2,4", "offline": "3", "exclude": "4", "torpid": "",
	 "drain": {"1-2": {"timestamp": 1764547200.5, "reason": "bad fan"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	allocated := idset.New(0, 2)
	tests := []struct {
		name string
		o    resourceStatusOptions
		want string
	}{
		{"default", resourceStatusOptions{format: mustResourceFormat(t, "status", "default"), states: "avail,exclude,draining,drained"}, `       STATE UP NNODES NODELIST
       avail  ✔      1 node0
      avail*  ✗      1 node3
     exclude  ✔      1 node4
    draining  ✔      1 node2
     drained  ✔      1 node1
`},
		{"long with states", resourceStatusOptions{format: mustResourceFormat(t, "status", "long"), states: "drain", statesSet: true}, `       STATE UP NNODES REASON                         NODELIST
    draining  ✔      1 bad fan                        node2
     drained  ✔      1 bad fan                        node1
`},
		{"custom", resourceStatusOptions{format: "{statex} {status} {ranks} {up.ascii}", states: "avail", noHeader: true}, `avail online 0 y
avail offline 3 n
`},
		{"online only", resourceStatusOptions{format: "{state} {nnodes}", states: "online", statesSet: true, noHeader: true}, `avail 1
exclude 1
torpid 0
housekeeping 0
draining 1
drained 1
`},
		{"allocated", resourceStatusOptions{format: "{state} {nodelist}", states: "allocated", statesSet: true, noHeader: true}, `allocated node[0,2]
`},
		{"torpid and housekeeping empty", resourceStatusOptions{format: "{state} {nnodes}", states: "torpid,housekeeping", statesSet: true, noHeader: true}, `torpid 0
housekeeping 0
`},
		{"all", resourceStatusOptions{format: "{state} {nodelist}", states: "all", noHeader: true}, `avail node0
avail* node3
exclude node4
allocated node[0,2]
draining node2
drained node1
`},
		{"default states", resourceStatusOptions{format: "{state} {nodelist}", states: statusDefaultStates, noHeader: true}, `avail node0
avail* node3
exclude node4
draining node2
drained node1
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := runResourceStatus(st, allocated, tt.o, false, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out.String(), tt.want)
			}
		})
	}
	// the drain listing
	o := resourceStatusOptions{format: mustResourceFormat(t, "drain", "long"), states: "drain", statesSet: true, skipEmpty: true}
	var out bytes.Buffer
	if err := runResourceStatus(st, idset.Set{}, o, false, &out); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1764547200, 0).Format("2006-01-02T15:04:05")
	want := "TIME                 STATE    RANKS    REASON                         NODELIST\n" +
		ts + "  drained  1-2      bad fan                        node[1-2]\n"
	if out.String() != want {
		t.Fatalf("drain list:\n%q\nwant:\n%q", out.String(), want)
	}
}

// TestResourceCommandsIntegration runs flux resource against a real
// instance with a configured inventory of 4 nodes × 4 cores.
func TestResourceCommandsIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{
		"resource.config":           `[{"hosts":"node[0-3]","cores":"0-3"}]`,
		"resource.monitor-force-up": "1",
	}})
	want := `     STATE NNODES NCORES NGPUS NODELIST
      free      4     16     0 node[0-3]
 allocated      0      0     0 
      down      0      0     0 
`
	var out string
	deadline := time.Now().Add(20 * time.Second)
	for {
		out = inst.MustRun(t, "resource", "list")
		if out == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out != want {
		t.Fatalf("flux resource list:\n%s\nwant:\n%s", out, want)
	}
	if got := inst.MustRun(t, "resource", "info"); got != "4 Nodes, 16 Cores, 0 GPUs\n" {
		t.Fatalf("flux resource info: %q", got)
	}
	inst.MustRun(t, "resource", "drain", "node[1-2]", "fan", "broken")
	r := inst.Run(t, "resource", "drain", "1")
	if r.Code != 1 || !strings.Contains(r.Stderr, "already drained") || !strings.Contains(r.Stderr, "--force") {
		t.Fatalf("second drain: %+v", r)
	}
	if got := inst.MustRun(t, "resource", "drain", "-n", "-o", "{state} {reason} {nodelist}"); got != "drained fan broken node[1-2]\n" {
		t.Fatalf("drain list: %q", got)
	}
	if got := inst.MustRun(t, "resource", "status", "-n", "-o", "{state} {nnodes} {nodelist}"); got != "avail 2 node[0,3]\ndrained 2 node[1-2]\n" {
		t.Fatalf("status: %q", got)
	}
	if got := inst.MustRun(t, "resource", "list", "-n", "-s", "down", "-o", "{state} {nodelist}"); got != "down node[1-2]\n" {
		t.Fatalf("list down: %q", got)
	}
	// a job's node is allocated; drained, it is draining
	id := strings.TrimSpace(inst.MustRun(t, "submit", "--setattr=system.exec.test.run_duration=60", "-N1", "true"))
	inst.MustRun(t, "job", "wait-event", "-t", "30", id, "start")
	if got := inst.MustRun(t, "resource", "status", "-s", "allocated", "-n", "-o", "{state} {nnodes}"); got != "allocated 1\n" {
		t.Fatalf("status -s allocated: %q", got)
	}
	if got := inst.MustRun(t, "resource", "status", "-s", "torpid,housekeeping", "-n", "-o", "{state} {nnodes}"); got != "torpid 0\nhousekeeping 0\n" {
		t.Fatalf("status -s torpid,housekeeping: %q", got)
	}
	inst.MustRun(t, "resource", "drain", "0", "busy")
	if got := inst.MustRun(t, "resource", "drain", "-n", "-o", "{state} {reason} {nodelist}"); got != "draining busy node0\ndrained fan broken node[1-2]\n" {
		t.Fatalf("drain list with a job: %q", got)
	}
	inst.MustRun(t, "cancel", id)
	inst.MustRun(t, "job", "wait-event", "-t", "30", id, "clean")
	inst.MustRun(t, "resource", "undrain", "0")
	inst.MustRun(t, "resource", "undrain", "1-2")
	r = inst.Run(t, "resource", "undrain", "1")
	if r.Code != 1 || !strings.Contains(r.Stderr, "not drained") {
		t.Fatalf("second undrain: %+v", r)
	}
	var R struct {
		Version   int `json:"version"`
		Execution struct {
			Nodelist []string `json:"nodelist"`
		} `json:"execution"`
	}
	if err := json.Unmarshal([]byte(inst.MustRun(t, "resource", "R")), &R); err != nil || R.Execution.Nodelist[0] != "node[0-3]" {
		t.Fatalf("flux resource R: %v %+v", err, R)
	}
}

// A node belongs to the queues whose required properties it has ("^p":
// it must not have p); propertiesx leaves out properties named like a
// queue.
func TestQueueRanks(t *testing.T) {
	pol := &policy.Config{Queues: map[string]policy.Queue{
		"batch": {Requires: []string{"batch"}},
		"big":   {Requires: []string{"batch", "^small"}},
		"all":   {},
	}}
	// rank 0: batch; rank 1: batch,small; rank 2: none
	R, err := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-2","children":{"core":"0"}}],` +
		`"nodelist":["n[0-2]"],"properties":{"batch":"0-1","small":"1"},"starttime":0,"expiration":0}}`))
	if err != nil {
		t.Fatal(err)
	}
	qr, err := queueRanks(R, pol)
	if err != nil {
		t.Fatal(err)
	}
	for rank, want := range map[uint]string{0: "all,batch,big", 1: "all,batch", 2: "all"} {
		var in []string
		for _, name := range pol.Names() {
			if qr[name].Contains(rank) {
				in = append(in, name)
			}
		}
		if got := strings.Join(in, ","); got != want {
			t.Errorf("queues of rank %d: %q, want %q", rank, got, want)
		}
	}
	if qr, err := queueRanks(R, &policy.Config{}); err != nil || len(qr) != 0 {
		t.Errorf("no queues configured: %v %v", qr, err)
	}
	if got := propertiesExcludingQueues(pol, "batch,gpu,small"); got != "gpu,small" {
		t.Errorf("propertiesx: %q", got)
	}
}

func mustResourceFormat(t *testing.T, cmd, name string) string {
	t.Helper()
	f, err := resourceFormat(cmd, name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// schedStatusQueues is node[0-3] × 2 cores: ranks 0-1 have property
// "batch", 2-3 "debug"; node1 is down and node2's core 0 allocated.
const schedStatusQueues = `{
 "all": {"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}],"nodelist":["node[0-3]"],"properties":{"batch":"0-1","debug":"2-3"},"starttime":0,"expiration":0}},
 "down": {"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0-1"}}],"nodelist":["node1"],"properties":{"batch":"1"},"starttime":0,"expiration":0}},
 "allocated": {"version":1,"execution":{"R_lite":[{"rank":"2","children":{"core":"0"}}],"nodelist":["node2"],"properties":{"debug":"2"},"starttime":0,"expiration":0}}
}`

var twoQueues = &policy.Config{Queues: map[string]policy.Queue{
	"batch": {Requires: []string{"batch"}},
	"debug": {Requires: []string{"debug"}},
}}

// flux resource list with queues: -q keeps a line for every state asked
// for, as without -q, and an empty state makes one line per queue.
func TestResourceListQueues(t *testing.T) {
	ss, err := resource.ParseSchedStatus([]byte(schedStatusQueues))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    resourceListOptions
		want string
	}{
		{"default", resourceListOptions{format: "default", states: "free,allocated,down"}, `     STATE QUEUE NNODES NCORES NGPUS NODELIST
      free batch      1      2     0 node0
      free debug      2      3     0 node[2-3]
 allocated debug      1      1     0 node2
      down batch      1      2     0 node1
`},
		{"-q debug keeps the down line", resourceListOptions{format: "default", states: "free,allocated,down", queues: []string{"debug"}}, `     STATE QUEUE NNODES NCORES NGPUS NODELIST
      free debug      2      3     0 node[2-3]
 allocated debug      1      1     0 node2
      down debug      0      0     0 
`},
		{"-q batch", resourceListOptions{format: "{state} {queue} {nnodes}", states: "free,allocated,down", queues: []string{"batch"}, noHeader: true},
			"free batch 1\nallocated batch 0\ndown batch 1\n"},
		{"-q both, comma-separated", resourceListOptions{format: "{state} {nnodes}", states: "free,allocated,down", queues: []string{"debug,batch"}, noHeader: true},
			"free 3\nallocated 1\ndown 1\n"},
		{"empty state: a line per queue", resourceListOptions{format: "{state} {queue} {nnodes}", states: "allocated", include: "0-1", noSkipEmpty: true, noHeader: true},
			"allocated batch 0\nallocated debug 0\n"},
		{"no queue field: one empty line", resourceListOptions{format: "{state} {nnodes}", states: "allocated", queues: []string{"batch"}, noHeader: true},
			"allocated 0\n"},
		{"-i skips empty lines", resourceListOptions{format: "{state} {nodelist}", states: "free,allocated,down", include: "node0", noHeader: true},
			"free node0\n"},
		{"--skip-empty", resourceListOptions{format: "{state} {nodelist}", states: "free,allocated,down", queues: []string{"debug"}, skipEmpty: true, noHeader: true},
			"free node[2-3]\nallocated node2\n"},
		{"info -q", resourceListOptions{format: "{nnodes} Nodes, {ncores} Cores, {ngpus} GPUs", states: "all", queues: []string{"batch"}, noHeader: true},
			"2 Nodes, 4 Cores, 0 GPUs\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.policy = twoQueues
			var out bytes.Buffer
			if err := runResourceList(ss, tt.o, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out.String(), tt.want)
			}
		})
	}
	var out bytes.Buffer
	err = runResourceList(ss, resourceListOptions{format: "default", states: "all", queues: []string{"nope"}, policy: twoQueues}, &out)
	if err == nil || err.Error() != "--queue: nope: no such queue" {
		t.Fatalf("unknown queue: %v", err)
	}
	if err := runResourceR(ss, resourceListOptions{states: "all", queues: []string{"debug"}, policy: twoQueues}, &out); err != nil {
		t.Fatal(err)
	}
	R, err := rset.Parse(bytes.TrimSpace(out.Bytes()))
	if err != nil || R.Ranks().String() != "2-3" {
		t.Fatalf("R -q debug: %v %s", err, out.String())
	}
}

// torpid nodes as a flux-core resource service reports them, and -q on
// the administrative view.
func TestResourceStatusTorpidQueues(t *testing.T) {
	st, err := resource.ParseStatus([]byte(`{
	 "R": {"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}],"nodelist":["node[0-3]"],"properties":{"batch":"0-1","debug":"2-3"},"starttime":0,"expiration":0}},
	 "online": "0-3", "offline": "", "exclude": "", "torpid": "1,3",
	 "drain": {"1": {"timestamp": 1764547200.5, "reason": "slow"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    resourceStatusOptions
		want string
	}{
		// a torpid node is not avail; a drained one shows as drained
		{"default", resourceStatusOptions{format: "{state} {nodelist}", states: statusDefaultStates}, "avail node[0,2]\ntorpid node3\ndrained node1\n"},
		// unless drain states are not shown
		{"torpid only", resourceStatusOptions{format: "{state} {nodelist}", states: "torpid", statesSet: true}, "torpid node[1,3]\n"},
		{"-q debug", resourceStatusOptions{format: "{state} {nodelist}", states: statusDefaultStates, queues: []string{"debug"}}, "avail node2\ntorpid node3\n"},
		{"-q batch drain list", resourceStatusOptions{format: "{state} {reason} {nodelist}", states: "drain", statesSet: true, skipEmpty: true, queues: []string{"batch"}}, "drained slow node1\n"},
		{"-q debug drain list", resourceStatusOptions{format: "{state} {reason} {nodelist}", states: "drain", statesSet: true, skipEmpty: true, queues: []string{"debug"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.noHeader = true
			tt.o.policy = twoQueues
			var out bytes.Buffer
			if err := runResourceStatus(st, idset.Set{}, tt.o, false, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out.String(), tt.want)
			}
		})
	}
	var out bytes.Buffer
	o := resourceStatusOptions{format: "{state}", states: "avail", queues: []string{"nope"}, policy: twoQueues}
	if err := runResourceStatus(st, idset.Set{}, o, false, &out); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown queue: %v", err)
	}
	o = resourceStatusOptions{format: "{state}", states: "avail,bogus"}
	if err := runResourceStatus(st, idset.Set{}, o, false, &out); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("bad state: %v", err)
	}
}

// -s help lists the valid states on stderr and succeeds, with no
// instance to talk to.
func TestResourceStatusStatesHelp(t *testing.T) {
	t.Setenv("FLUX_URI", "local:///nonexistent")
	var out, errb bytes.Buffer
	if code := Main([]string{"resource", "status", "-s", "help"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "flux-resource: valid states: all,online,avail,offline,exclude,drain,draining,drained,torpid,allocated,housekeeping\n"
	if out.String() != "" || errb.String() != want {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
}
