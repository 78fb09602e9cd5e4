package snapfile

import (
	"log/slog"
	"os"
	"sync"
	"time"
)

// Keeper decides when a module writes its snapshot again and writes it
// off the module's goroutine. The module counts what became final
// (Count) and what else changed (Changed), says when its state is whole
// (Whole), and gives Take, which
// captures on the module's goroutine what to write and returns how to
// encode it beside it. Every method runs on the module's goroutine
// except the encoding and the write.
//
// A snapshot is written when Every records (or a sixteenth of Total)
// have changed since the last write, or some have and nothing became
// final since the last look (the instance has gone quiet), looked at
// every Period: a crash then costs at most that many reads more at the
// next start. Final writes it once more as the module unloads.
type Keeper struct {
	Path   string        // "": no statedir, no snapshot
	Name   string        // for the log: "job-list snapshot"
	Period time.Duration // how often to look
	Every  int           // records that call for a write
	Post   func(func())  // runs fn on the module's goroutine
	Total  func() int    // records in the state now
	Count  func() uint64 // records that became final so far (only grows)
	Take   func() (encode func() []byte)
	Log    *slog.Logger

	written, seen      uint64
	changed            int
	whole              bool
	writing, scheduled bool
	wg                 sync.WaitGroup
}

// Changed counts other changes the file does not have yet (records
// removed, records read from elsewhere).
func (k *Keeper) Changed(n int) { k.changed += n }

// Whole says the state holds everything (what it restores has been
// read): snapshots may be written from now on.
func (k *Keeper) Whole() {
	k.whole = true
	k.schedule()
}

func (k *Keeper) pending() int { return int(k.Count()-k.written) + k.changed }

func (k *Keeper) schedule() {
	if k.Path == "" || k.scheduled {
		return
	}
	k.scheduled = true
	time.AfterFunc(k.Period, func() {
		k.Post(func() {
			k.scheduled = false
			k.look()
			k.schedule()
		})
	})
}

func (k *Keeper) look() {
	n := k.Count()
	quiet := n == k.seen
	k.seen = n
	if !k.whole || k.writing {
		return
	}
	p := k.pending()
	if p == 0 || !quiet && p < max(k.Every, k.Total()/16) {
		return
	}
	encode := k.take()
	k.writing = true
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		start := time.Now()
		err := WriteFile(k.Path, encode())
		k.Post(func() {
			k.writing = false
			if err != nil {
				k.Log.Warn("writing the "+k.Name, "path", k.Path, "err", err)
				k.changed++ // try again next period
				return
			}
			k.Log.Debug(k.Name+" written", "elapsed", time.Since(start).String())
		})
	}()
}

func (k *Keeper) take() func() []byte {
	encode := k.Take()
	k.written, k.changed = k.Count(), 0
	return encode
}

// Final writes the snapshot as the module unloads (its goroutine has
// stopped: nothing else touches the state), unless nothing changed or
// the state was never whole (the old file then has more).
func (k *Keeper) Final() {
	k.wg.Wait()
	if k.Path == "" || !k.whole {
		return
	}
	if _, err := os.Stat(k.Path); err == nil && k.pending() == 0 {
		return
	}
	if err := WriteFile(k.Path, k.take()()); err != nil {
		k.Log.Warn("writing the "+k.Name, "path", k.Path, "err", err)
	}
}
