package integration

import (
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestNICLocality: on two corona-like nodes declared in
// [[resource.config]] (the fabric NICs in the second domain only; one
// core a domain, so that per-task binding binds to real CPUs of this
// machine), a job spanning both gets its slots in the NIC's domain and
// each task is told its NICs (FLUX_TASK_NICS, management Ethernet left
// out); with cpu-affinity=per-task only the tasks bound to that domain's
// CPU are; a job on one node is placed and told as before (nothing).
func TestNICLocality(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs (one per declared domain)")
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2, Attrs: map[string]string{
		"resource.config": `[{"hosts":"n[0-1]","cores":"0-1","numa":[` +
			`{"cores":"0","socket":0},` +
			`{"cores":"1","socket":1,"nics":["mlx5_0","hsi0","eno1"]}]}]`,
		"resource.noverify": "true", // hosts n0 and n1 are this one
	}, Args: []string{"--test-hosts=n[0-1]"}})}
	show := `echo ${FLUX_TASK_NICS-unset}`

	out := e.must("run", "-N2", "-n2", "--label-io", "sh", "-c", show)
	if got := sortedLines(out); !slices.Equal(got, []string{"0: mlx5_0,hsi0", "1: mlx5_0,hsi0"}) {
		t.Errorf("-N2 -n2: %q", got)
	}
	R, err := rset.Parse([]byte(e.must("job", "info", e.must("job", "last"), "R")))
	if err != nil {
		t.Fatal(err)
	}
	for n := range R.All() {
		if !n.Cores.Difference(idset.MustParse("1")).Empty() {
			t.Errorf("-N2: rank %d got core %s, want the NIC's domain's (1)", n.Rank, n.Cores)
		}
	}

	out = e.must("run", "-N2", "-n4", "-o", "cpu-affinity=per-task", "--label-io", "sh", "-c", show)
	if got := sortedLines(out); !slices.Equal(got, []string{"0: unset", "1: mlx5_0,hsi0", "2: unset", "3: mlx5_0,hsi0"}) {
		t.Errorf("-N2 -n4 per-task: %q", got)
	}

	if got := e.must("run", "-N1", "-n1", "sh", "-c", show); got != "unset" {
		t.Errorf("-N1: FLUX_TASK_NICS=%q, want unset", got)
	}
	R, err = rset.Parse([]byte(e.must("job", "info", e.must("job", "last"), "R")))
	if err != nil {
		t.Fatal(err)
	}
	for n := range R.All() {
		if !n.Cores.Difference(idset.MustParse("0")).Empty() {
			t.Errorf("-N1: core %s, want the first domain's (placed as before)", n.Cores)
		}
	}
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return lines
}
