package kvs_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/modules/kvs/kvstest"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// Whatever the timers do, everything ready is committed: 64 writers, some
// arriving after a batch has started (stale gather timers), all answered.
func TestGatherNeverStalls(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	c := ctx(t)
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		errs := make([]error, 64)
		for i := range errs {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if i%3 == 0 {
					time.Sleep(time.Duration(i) * 10 * time.Microsecond)
				}
				var txn kvs.Txn
				txn.Put(fmt.Sprintf("g.r%d.k%d", round, i), []byte("v"))
				_, errs[i] = kvs.Commit(c, h, "", 0, &txn)
			}(i)
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d writer %d: %v", round, i, err)
			}
		}
	}
}
