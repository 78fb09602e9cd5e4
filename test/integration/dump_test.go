package integration

import (
	"path/filepath"
	"testing"
)

// TestDumpRestoreOptions: flux-core's --maxreqs on both commands (restore
// keeps at most N stores in flight), and restore's refusal without a
// target in flux-core's words.
func TestDumpRestoreOptions(t *testing.T) {
	e := start(t)
	tar := filepath.Join(t.TempDir(), "kvs.tar")
	e.must("kvs", "put", "dumpt.a=1", "dumpt.b=2")
	e.must("dump", "-q", "--maxreqs=1000", tar)
	e.fail("Please specify a restore target with --checkpoint or --key", "restore", tar)
	e.fail("invalid value for maxreqs", "restore", "--maxreqs=0", "--key=r", tar)
	e.fail("invalid value for maxreqs", "dump", "--maxreqs=-1", tar)
	e.must("restore", "-q", "--maxreqs=1", "--key=restored", tar)
	if got := e.must("kvs", "get", "restored.dumpt.b"); got != "2" {
		t.Errorf("restored.dumpt.b = %q", got)
	}
}
