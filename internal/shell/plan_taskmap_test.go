package shell

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// planOf plans ntasks on nnodes nodes of 2 cores each with shell options.
func planOf(t *testing.T, nnodes, ntasks int, opts map[string]any) (*Plan, error) {
	t.Helper()
	R := mustR(t, fmt.Sprintf(`{"version":1,"execution":{"R_lite":[{"rank":"0-%d","children":{"core":"0-1"}}]}}`, nnodes-1))
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: ntasks, NNodes: nnodes})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range opts {
		if err := js.SetShellOption(k, v); err != nil {
			t.Fatal(err)
		}
	}
	o, err := PlanOptionsFrom(js)
	if err != nil {
		return nil, err
	}
	return MakePlan(js, R, o)
}

// TestPlanSpreadsTasksOverNodes: a task total is dealt out node by node,
// so no node of the allocation sits idle (-N4 -n6: 2,2,1,1 as flux-core).
func TestPlanSpreadsTasksOverNodes(t *testing.T) {
	for _, c := range []struct {
		nodes, tasks int
		want         string
	}{
		{4, 6, "[2 2 1 1]"},
		{4, 4, "[1 1 1 1]"},
		{4, 8, "[2 2 2 2]"},
		{2, 3, "[2 1]"},
	} {
		p, err := planOf(t, c.nodes, c.tasks, nil)
		if err != nil {
			t.Fatalf("-N%d -n%d: %v", c.nodes, c.tasks, err)
		}
		if got := fmt.Sprint(p.Counts); got != c.want {
			t.Errorf("-N%d -n%d: counts %s, want %s", c.nodes, c.tasks, got, c.want)
		}
	}
}

// TestPlanTaskmapSchemes: the taskmap shell option's block, cyclic[:N]
// and manual schemes, and errors naming what is wrong.
func TestPlanTaskmapSchemes(t *testing.T) {
	for _, c := range []struct {
		scheme, value, want string
	}{
		{"block", "", "[[0,4,2,1]]"},
		{"cyclic", "", "[[0,4,1,2]]"},
		{"cyclic", "2", "[[0,4,2,1]]"},
		{"manual", "[[0,1,5,1],[1,3,1,1]]", "[[0,1,5,1],[1,3,1,1]]"},
	} {
		p, err := planOf(t, 4, 8, map[string]any{"taskmap": map[string]any{"scheme": c.scheme, "value": c.value}})
		if err != nil {
			t.Fatalf("%s:%s: %v", c.scheme, c.value, err)
		}
		if got := p.Map.EncodeArray(); got != c.want {
			t.Errorf("%s:%s: map %s, want %s", c.scheme, c.value, got, c.want)
		}
	}
	// a manual map moves tasks between nodes; the counts follow it
	p, err := planOf(t, 4, 6, map[string]any{"taskmap": map[string]any{"scheme": "manual", "value": "[[0,1,3,1],[1,3,1,1]]"}})
	if err != nil || fmt.Sprint(p.Counts) != "[3 1 1 1]" {
		t.Fatalf("manual map counts: %v %v", p, err)
	}
	for _, c := range []struct{ scheme, value, want string }{
		{"cyclic", "0", "stride"},
		{"manual", "[[0,4,4]]", "manual"},
		{"hostfile", "x", "want block, cyclic or manual"},
	} {
		if _, err := planOf(t, 4, 8, map[string]any{"taskmap": map[string]any{"scheme": c.scheme, "value": c.value}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:%s: error %v, want it to mention %q", c.scheme, c.value, err, c.want)
		}
	}
	if _, err := planOf(t, 4, 8, map[string]any{"taskmap": map[string]any{"scheme": "manual", "value": "[[0,1,1,1]]"}}); err == nil || !strings.Contains(err.Error(), "the job has 8 tasks on 4 nodes") {
		t.Errorf("manual map of the wrong size: %v", err)
	}
}

// TestPlanLargeTotal: a task total far beyond the slots is counted out,
// not dealt one by one (a user's count must not make job-exec spin), and
// the same as dealing would: once the slots are full, one more per node
// per round in node order.
func TestPlanLargeTotal(t *testing.T) {
	p, err := planOf(t, 3, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.Counts); got != "[4 3 3]" {
		t.Errorf("-N3 -n10 on 2-core nodes: %s, want [4 3 3]", got)
	}
	p, err = planOf(t, 200, 200*MaxTasksPerNode-1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.NTasks != 200*MaxTasksPerNode-1 || p.Counts[0] != MaxTasksPerNode {
		t.Errorf("%d tasks on 200 nodes: %v", 200*MaxTasksPerNode, p.Counts[:3])
	}
	if _, err := planOf(t, 3, jobspec.MaxCount, nil); err == nil || !strings.Contains(err.Error(), "tasks per node") {
		t.Errorf("%d tasks on 3 nodes: %v", jobspec.MaxCount, err)
	}
	if _, err := planOf(t, 1, 1, map[string]any{"per-resource": map[string]any{"type": "core", "count": float64(1 << 40)}}); err == nil || !strings.Contains(err.Error(), "per-resource.count") {
		t.Errorf("per-resource.count=2^40: %v", err)
	}
}
