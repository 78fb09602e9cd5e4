package sched

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden trace files in testdata")

// TestTraces replays the scheduling traces in testdata/*.trace. Each block
// is a command line, "----", and the expected output, separated from the
// next block by a blank line; lines starting with # are comments. Run with -rewrite to regenerate the outputs
// after an intended change, and review the diff.
//
// Commands:
//
//	pool R-JSON            start over with this inventory, all nodes up
//	up IDSET / down IDSET  change node availability
//	depth N                FCFS lookahead
//	submit ID [prio=P] [t=T] [slots=S] [cores=C] [gpus=G] [nodes=N] [excl]
//	       [dur=D] [constraint=JSON]
//	                       queue a job (denied if never feasible)
//	schedule [now=T]       run one FCFS pass; print what started
//	free ID                release a started job
//	cancel ID              drop a pending job
//	prio ID P              change a pending job's priority
//	status                 print free counts, allocations and the queue
func TestTraces(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.trace")
	if len(files) == 0 {
		t.Fatal("no traces in testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runTrace(t, file) })
	}
}

type traceState struct {
	pool   *Pool
	queue  *Queue
	policy FCFS
	allocs map[uint64]*Alloc
}

func runTrace(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	st := &traceState{queue: NewQueue(), allocs: map[uint64]*Alloc{}}
	blocks := strings.Split(strings.TrimSpace(string(data)), "\n\n")
	for _, block := range blocks {
		cmd, want, _ := strings.Cut(block, "\n----\n")
		cmd = strings.TrimSuffix(cmd, "\n----")
		var lines []string
		for _, l := range strings.Split(cmd, "\n") {
			if !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		got := "ok"
		if len(lines) > 0 {
			got = st.run(t, strings.TrimSpace(strings.Join(lines, " ")))
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", cmd, got)
		if !*rewrite && strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("%s\ngot:\n%s\nwant:\n%s", cmd, got, want)
		}
	}
	if *rewrite {
		os.WriteFile(file, []byte(strings.TrimSpace(out.String())+"\n"), 0o644)
	}
}

func (st *traceState) run(t *testing.T, line string) string {
	word, rest, _ := strings.Cut(line, " ")
	args := strings.Fields(rest)
	switch word {
	case "pool":
		r, err := rset.Parse([]byte(rest))
		if err != nil {
			t.Fatalf("pool: %v", err)
		}
		st.pool = NewPool(r)
		st.pool.SetAvailable(r.Ranks(), true)
		st.queue = NewQueue()
		st.allocs = map[uint64]*Alloc{}
		return fmt.Sprintf("%d nodes, %d cores, %d gpus", r.NNodes(), r.NCores(), r.NGPUs())
	case "up", "down":
		ids := idset.MustParse(args[0])
		return "changed " + st.pool.SetAvailable(ids, word == "up").String()
	case "depth":
		st.policy.Depth, _ = strconv.Atoi(args[0])
		return "ok"
	case "submit":
		id, _ := strconv.ParseUint(args[0], 10, 64)
		j := &Job{ID: id, Priority: 16, Req: &Request{Slots: 1, SlotCores: 1}}
		for _, a := range args[1:] {
			k, v, _ := strings.Cut(a, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "prio":
				j.Priority = int64(n)
			case "t":
				j.TSubmit, _ = strconv.ParseFloat(v, 64)
			case "slots":
				j.Req.Slots = n
			case "cores":
				j.Req.SlotCores = n
			case "gpus":
				j.Req.SlotGPUs = n
			case "nodes":
				j.Req.Nodes = n
			case "excl":
				j.Req.Exclusive = true
			case "dur":
				j.Req.Duration, _ = strconv.ParseFloat(v, 64)
			case "constraint":
				var c jobspec.Constraint
				var obj map[string]any
				if err := json.Unmarshal([]byte(v), &obj); err != nil {
					t.Fatalf("constraint: %v", err)
				}
				js := &jobspec.Jobspec{Attributes: jobspec.Attributes{System: map[string]any{"constraints": obj}}}
				cp, err := js.Constraints()
				if err != nil {
					t.Fatalf("constraint: %v", err)
				}
				c = *cp
				j.Req.Constraint = &c
			default:
				t.Fatalf("submit: unknown argument %q", a)
			}
		}
		if err := st.pool.Feasible(j.Req); err != nil {
			return "denied: " + err.Error()
		}
		if err := st.queue.Add(j); err != nil {
			return err.Error()
		}
		return "queued"
	case "schedule":
		now := 0.0
		if len(args) > 0 {
			now, _ = strconv.ParseFloat(strings.TrimPrefix(args[0], "now="), 64)
		}
		var lines []string
		for _, d := range st.policy.Schedule(st.queue, st.pool, now) {
			st.queue.Remove(d.Job.ID)
			st.allocs[d.Job.ID] = d.Alloc
			lines = append(lines, fmt.Sprintf("start %d: %s [%g-%g]", d.Job.ID, st.pool.Summary(d.Alloc), d.Alloc.Start, d.Alloc.Expiration))
		}
		if len(lines) == 0 {
			return "nothing started"
		}
		return strings.Join(lines, "\n")
	case "free":
		id, _ := strconv.ParseUint(args[0], 10, 64)
		a := st.allocs[id]
		if a == nil {
			return "no such allocation"
		}
		delete(st.allocs, id)
		if err := st.pool.Free(a); err != nil {
			return err.Error()
		}
		return "freed " + st.pool.Summary(a)
	case "cancel":
		id, _ := strconv.ParseUint(args[0], 10, 64)
		if st.queue.Remove(id) == nil {
			return "not queued"
		}
		return "cancelled"
	case "prio":
		id, _ := strconv.ParseUint(args[0], 10, 64)
		p, _ := strconv.ParseInt(args[1], 10, 64)
		return strconv.FormatBool(st.queue.SetPriority(id, p))
	case "status":
		cores, free, gpus, freeGPUs := st.pool.Counts()
		var q []string
		for j := range st.queue.All() {
			q = append(q, strconv.FormatUint(j.ID, 10))
		}
		return fmt.Sprintf("free %d/%d cores, %d/%d gpus\nallocated: %s\nqueue: %s",
			free, cores, freeGPUs, gpus, st.pool.Summary(st.pool.Allocated()), strings.Join(q, " "))
	}
	t.Fatalf("unknown trace command %q", word)
	return ""
}
