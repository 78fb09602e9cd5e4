package jobshell

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	contentmod "github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/jobexec"
	"github.com/fluxgo/fluxgo/internal/modules/jobingest"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/modtest"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// run submits a job running argv with ntasks on the stand-in scheduler's
// R and returns the KVS after it finished.
func run(t *testing.T, size int, R string, argv []string, opts jobspec.CommandOptions, shellOpts map[string]any) (*modtest.KVS, jobid.ID, []string) {
	fk := modtest.NewKVS()
	reg := module.NewRegistry()
	reg.Register(contentmod.Name, contentmod.New)
	reg.Register("kvs", func() module.Module { return fk })
	reg.Register("job-manager", jobmanager.New)
	reg.Register("sched", func() module.Module { return &modtest.Sched{R: R} })
	reg.Register("job-exec", jobexec.New)
	reg.Register("job-ingest", jobingest.New)
	reg.Register("job-shell", New)
	mods := []broker.ModuleSpec{{Name: contentmod.Name, Ranks: "0"}, {Name: "kvs", Ranks: "0"}, {Name: "job-manager", Ranks: "0"}, {Name: "sched", Ranks: "0"},
		{Name: "job-shell"}, {Name: "job-exec", Ranks: "0"}, {Name: "job-ingest", Ranks: "0"}}
	inst := brokertest.Start(t, brokertest.Options{Size: size, Registry: reg, Modules: mods, Attrs: shellAttrs(t, nil)})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	js, err := jobspec.FromCommand(argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	for k, v := range shellOpts {
		js.SetShellOption(k, v)
	}
	b, _ := json.Marshal(js)
	f, _ := h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{}, flux.Streaming)
	var resp struct {
		ID jobid.ID `json:"id"`
	}
	if err := h.Call(ctx, "job-ingest.submit", flux.NodeidAny, map[string]any{"J": sign.Wrap(b, 0)}, &resp); err != nil {
		t.Fatal(err)
	}
	var names []string
	for len(names) == 0 || names[len(names)-1] != "clean" {
		m, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("journal: %v (%v)", err, names)
		}
		var e struct {
			ID     jobid.ID `json:"id"`
			Events []struct {
				Name string `json:"name"`
			} `json:"events"`
		}
		m.UnmarshalPayload(&e)
		for _, ev := range e.Events {
			if e.ID == resp.ID && ev.Name != "annotations" {
				names = append(names, ev.Name)
			}
		}
	}
	return fk, resp.ID, names
}

func events(t *testing.T, fk *modtest.KVS, key string) []eventlog.Event {
	evs, err := eventlog.Parse(fk.Value(key))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return evs
}

func TestRunAcrossRanks(t *testing.T) {
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0-2","children":{"core":"0-1"}}],"nodelist":["a","b","c"]}}`
	fk, id, names := run(t, 3, R, []string{"sh", "-c", "echo task $FLUX_TASK_RANK of $FLUX_JOB_SIZE"}, jobspec.CommandOptions{NTasks: 6}, nil)
	if strings.Join(names, " ") != "submit validate depend priority alloc start finish release free clean" {
		t.Fatalf("events %v", names)
	}
	dothex, _ := id.Encode("dothex")
	out := events(t, fk, "job."+dothex+".guest.output")
	if out[0].Name != "header" {
		t.Fatalf("first output event %q", out[0].Name)
	}
	lines := map[string]bool{}
	eofs := 0
	for _, ev := range out[1:] {
		var c struct {
			Stream string `json:"stream"`
			Rank   string `json:"rank"`
			Data   string `json:"data"`
			EOF    bool   `json:"eof"`
		}
		ev.DecodeContext(&c)
		if c.EOF {
			eofs++
		} else {
			lines[strings.TrimSpace(c.Data)] = true
		}
	}
	for i := 0; i < 6; i++ {
		if !lines["task "+string(rune('0'+i))+" of 6"] {
			t.Fatalf("missing output of task %d: %v", i, lines)
		}
	}
	if eofs != 12 {
		t.Fatalf("eof events %d", eofs)
	}
	var execNames []string
	for _, ev := range events(t, fk, "job."+dothex+".guest.exec.eventlog") {
		execNames = append(execNames, ev.Name)
	}
	got := strings.Join(execNames, " ")
	for _, want := range []string{"init", "starting", "shell.init", "shell.start", "shell.task-exit", "complete", "done"} {
		if !strings.Contains(got, want) {
			t.Fatalf("exec eventlog lacks %s: %s", want, got)
		}
	}
}

// outputData returns the data of a job's stdout events, by task rank.
func outputData(t *testing.T, fk *modtest.KVS, id jobid.ID) map[string]string {
	dothex, _ := id.Encode("dothex")
	data := map[string]string{}
	for _, ev := range events(t, fk, "job."+dothex+".guest.output")[1:] {
		var c struct {
			Stream string `json:"stream"`
			Rank   string `json:"rank"`
			Data   string `json:"data"`
		}
		ev.DecodeContext(&c)
		if c.Stream == "stdout" {
			data[c.Rank] += c.Data
		}
	}
	return data
}

// TestJobTmpdir: each node's tasks share a private FLUX_JOB_TMPDIR,
// removed with what they left in it once they have exited.
func TestJobTmpdir(t *testing.T) {
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a","b"]}}`
	fk, id, _ := run(t, 2, R, []string{"sh", "-c", `test -d "$FLUX_JOB_TMPDIR" && touch "$FLUX_JOB_TMPDIR/left" && echo "$FLUX_JOB_TMPDIR"`},
		jobspec.CommandOptions{NTasks: 2, NNodes: 2}, nil)
	out := outputData(t, fk, id)
	for _, rank := range []string{"0", "1"} {
		dir := strings.TrimSpace(out[rank])
		if want := "jobtmp-" + rank + "-" + id.F58(true); filepath.Base(dir) != want {
			t.Fatalf("task %s: FLUX_JOB_TMPDIR %q, want .../%s (output %v)", rank, dir, want, out)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is still there after the job (%v)", dir, err)
		}
	}
}

func TestExitStatusAndPMI(t *testing.T) {
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a","b"]}}`
	_, _, names := run(t, 2, R, []string{"sh", "-c", `test -n "$PMI_FD" && test "$PMI_SIZE" = 2 && exit $((3 + FLUX_TASK_RANK))`}, jobspec.CommandOptions{NTasks: 2}, nil)
	if names[len(names)-4] != "finish" {
		t.Fatalf("events %v", names)
	}
}

func eventNames(evs []eventlog.Event) string {
	var names []string
	for _, ev := range evs {
		names = append(names, ev.Name)
	}
	return strings.Join(names, " ")
}

// TestEventlogsOfAShortJob checks the logs of a job without output,
// whose output log goes to job-exec whole, and their order.
func TestEventlogsOfAShortJob(t *testing.T) {
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"nodelist":["a"]}}`
	fk, id, _ := run(t, 1, R, []string{"true"}, jobspec.CommandOptions{NTasks: 1}, nil)
	dothex, _ := id.Encode("dothex")
	exec := events(t, fk, "job."+dothex+".guest.exec.eventlog")
	if got := eventNames(exec); got != "init starting shell.init shell.start shell.task-exit shell-exit complete done" {
		t.Fatalf("exec eventlog: %s", got)
	}
	for i := 1; i < len(exec); i++ {
		if exec[i].Timestamp < exec[i-1].Timestamp {
			t.Fatalf("exec event %s before %s", exec[i].Name, exec[i-1].Name)
		}
	}
	out := events(t, fk, "job."+dothex+".guest.output")
	if got := eventNames(out); got != "header data data" {
		t.Fatalf("output eventlog: %s", got)
	}
	if string(out[0].Context) != `{"version":1,"encoding":{"stdout":"UTF-8","stderr":"UTF-8"},"count":{"stdout":1,"stderr":1},"options":{}}` {
		t.Fatalf("header %s", out[0].Context)
	}
}

// TestOutputFile checks output.stdout to a file: written by the leader
// for every task, labeled, and a redirect event in the log.
func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a","b"]}}`
	opts := map[string]any{"output": map[string]any{
		"stdout": map[string]any{"type": "file", "path": dir + "/out.{{id.dec}}", "label": true}}}
	fk, id, names := run(t, 2, R, []string{"sh", "-c", "echo hello; echo world"}, jobspec.CommandOptions{NTasks: 2}, opts)
	if names[len(names)-4] != "finish" {
		t.Fatalf("events %v", names)
	}
	b, err := os.ReadFile(dir + "/out." + strconv.FormatUint(uint64(id), 10))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	sort.Strings(lines)
	if strings.Join(lines, ",") != "0: hello,0: world,1: hello,1: world" {
		t.Fatalf("file:\n%s", b)
	}
	dothex, _ := id.Encode("dothex")
	out := events(t, fk, "job."+dothex+".guest.output")
	if got := eventNames(out); got != "header redirect data data" {
		t.Fatalf("output eventlog: %s", got)
	}
	if string(out[1].Context) != `{"stream":"stdout","rank":"0-1","path":"`+dir+`/out.`+strconv.FormatUint(uint64(id), 10)+`"}` {
		t.Fatalf("redirect %s", out[1].Context)
	}
}

// TestPMIExchange runs two tasks on two brokers that speak PMI-1 over
// PMI_FD by hand: each puts a key, both enter the barrier, each reads
// the other's key.
func TestPMIExchange(t *testing.T) {
	R := `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a","b"]}}`
	script := `
fd=$PMI_FD
req() { printf '%s\n' "$1" >&$fd; read -r line <&$fd; echo "$line"; }
req "cmd=init pmi_version=1 pmi_subversion=1" >/dev/null
kvs=$(req "cmd=get_my_kvsname" | sed 's/.*kvsname=\([^ ]*\).*/\1/')
req "cmd=put kvsname=$kvs key=k$FLUX_TASK_RANK value=v$FLUX_TASK_RANK" >/dev/null
req "cmd=barrier_in" >/dev/null
other=$((1 - FLUX_TASK_RANK))
req "cmd=get kvsname=$kvs key=k$other" | grep -q "value=v$other" || exit 9
req "cmd=get kvsname=$kvs key=PMI_process_mapping" | grep -q "value=(vector,(0,2,1))" || exit 8
req "cmd=finalize" >/dev/null
exit 0`
	fk, id, names := run(t, 2, R, []string{"sh", "-c", script}, jobspec.CommandOptions{NTasks: 2}, nil)
	dothex, _ := id.Encode("dothex")
	var statuses []string
	for _, ev := range events(t, fk, "job."+dothex+".guest.exec.eventlog") {
		if ev.Name == "complete" {
			statuses = append(statuses, string(ev.Context))
		}
	}
	if len(statuses) != 1 || statuses[0] != `{"status":0}` {
		out := events(t, fk, "job."+dothex+".guest.output")
		t.Fatalf("events %v, complete %v, output %v", names, statuses, out)
	}
}

// shellAttrs adds to attrs what the module needs to start shells in a
// test: the flux binary (the test's own executable is not one).
func shellAttrs(t *testing.T, attrs map[string]string) map[string]string {
	out := map[string]string{"job-shell.path": testinstance.Binary(t)}
	for k, v := range attrs {
		out[k] = v
	}
	return out
}
