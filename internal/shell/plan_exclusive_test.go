package shell

import (
	"fmt"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// TestPlanExclusiveNodes: flux run -N2 on nodes allocated whole runs one
// task per node, not one per core of R.
func TestPlanExclusiveNodes(t *testing.T) {
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-1"}}]}}`)
	js, err := jobspec.FromCommand([]string{"hostname"}, jobspec.CommandOptions{NTasks: 2, NNodes: 2, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := MakePlan(js, R, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.Counts); got != "[1 1]" {
		t.Fatalf("counts %s, want [1 1]", got)
	}
}
