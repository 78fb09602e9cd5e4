package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestNUMAMatching is issue 24's report with the real binary: on corona's
// topology (NUMA0 = cores 0-23 + GPUs 0-3, NUMA1 = cores 24-47 + GPUs
// 4-7), after a job holds cores 0-23, -n1 -c2 -g1 gets cores and a GPU of
// NUMA1, not cores 24-25 and GPU 0.
func TestNUMAMatching(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	xml, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "conformance", "hwloc", "corona.xml"))
	if err == nil {
		_, err = os.Stat(xml)
	}
	if err != nil {
		t.Skipf("conformance data not found: %v", err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Attrs: map[string]string{"resource.hwloc-xml": xml}})}

	inv, err := rset.Parse([]byte(e.must("resource", "R")))
	if err != nil {
		t.Fatal(err)
	}
	if groups, err := inv.NUMA(); err != nil || len(groups) != 1 || len(groups[0].Domains) != 2 {
		t.Fatalf("inventory scheduling key %s (%v)", inv.Scheduling(), err)
	}

	first := e.submit("-n1", "-c24", testDuration("60s"), "true")
	e.waitEvent(first, "alloc")
	second := e.submit("-n1", "-c2", "-g1", testDuration("1s"), "true")
	e.waitEvent(second, "alloc")
	R, err := rset.Parse([]byte(e.must("job", "info", second.String(), "R")))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := R.Node(0)
	if !ok {
		t.Fatalf("second job's R has no rank 0: %s", R.Encode())
	}
	numa1 := idset.MustParse("24-47")
	if n.Cores.Count() != 2 || !n.Cores.Difference(numa1).Empty() || n.GPUs.Count() != 1 || !n.GPUs.Difference(idset.MustParse("4-7")).Empty() {
		t.Fatalf("-c2 -g1 after -c24 got cores %s gpus %s, want 2 of 24-47 and 1 of 4-7", n.Cores, n.GPUs)
	}
	if strings.Contains(string(R.Scheduling()), rset.NUMAKey) {
		t.Errorf("the job's R carries the instance's domains: %s", R.Scheduling())
	}
	e.must("cancel", first.String())
}
