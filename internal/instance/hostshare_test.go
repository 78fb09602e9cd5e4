package instance

import (
	"runtime"
	"testing"

	"github.com/fluxgo/fluxgo/internal/modules/jobshell"
)

// A broker among more brokers than cores keeps no spare shell and (off
// rank 0) runs one thread of Go code; one among few is left alone, and
// what the user set wins.
func TestShareHost(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	cores := runtime.NumCPU()

	attrs := map[string]string{}
	shareHost(cores, 3, attrs)
	if _, ok := attrs[jobshell.SparesAttr]; ok || runtime.GOMAXPROCS(0) != procs {
		t.Fatalf("%d brokers on %d cores: attrs %v, GOMAXPROCS %d (want untouched, %d)", cores, cores, attrs, runtime.GOMAXPROCS(0), procs)
	}
	shareHost(4*cores, 0, attrs)
	if attrs[jobshell.SparesAttr] != "0" || runtime.GOMAXPROCS(0) != procs {
		t.Fatalf("rank 0 of %d brokers: attrs %v, GOMAXPROCS %d (want spares 0, %d)", 4*cores, attrs, runtime.GOMAXPROCS(0), procs)
	}
	attrs = map[string]string{jobshell.SparesAttr: "2"}
	shareHost(4*cores, 5, attrs)
	if attrs[jobshell.SparesAttr] != "2" || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("rank 5 of %d brokers: attrs %v, GOMAXPROCS %d (want the user's spares, 1)", 4*cores, attrs, runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(procs)
	t.Setenv("GOMAXPROCS", "2")
	shareHost(4*cores, 5, map[string]string{})
	if runtime.GOMAXPROCS(0) != procs {
		t.Fatalf("GOMAXPROCS from the environment was overridden: %d", runtime.GOMAXPROCS(0))
	}
}
