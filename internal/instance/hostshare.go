package instance

import (
	"os"
	"runtime"

	"github.com/fluxgo/fluxgo/internal/modules/jobshell"
)

// A test instance (flux start --test-size N) runs all N brokers on this
// host. When they outnumber its cores, what each broker does for
// itself alone at start-up is paid N times over on a few cores: 256
// brokers on 2 cores made the join CPU-bound (bench/brokers). Such a
// broker is tuned for sharing:
//
//   - it keeps no spare job shell (job-shell.spares=0): the pool starts
//     a shell when the first job needs one, instead of a second process
//     per broker half a second after the start;
//   - a broker other than rank 0 runs Go code on one thread at a time
//     (GOMAXPROCS=1): more threads only spin against the other
//     brokers' for the same cores (the runtime's monitor and scheduler
//     were 40% of the start's CPU). Rank 0, which does the instance's
//     central work, keeps the default.
//
// An attribute or GOMAXPROCS the user set wins; a broker alone on its
// host (or among no more brokers than cores) is unchanged.
func shareHost(brokersOnHost, rank int, attrs map[string]string) {
	cores := runtime.NumCPU()
	if brokersOnHost <= cores {
		return
	}
	if _, ok := attrs[jobshell.SparesAttr]; !ok {
		attrs[jobshell.SparesAttr] = "0"
	}
	if rank > 0 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(max(1, cores/brokersOnHost))
	}
}
