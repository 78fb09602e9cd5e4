package formats

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	run := func(name string, n int, f func()) {
		f()
		best := time.Duration(1 << 62)
		for rep := 0; rep < 5; rep++ {
			start := cpuNow()
			for i := 0; i < n; i++ {
				f()
			}
			if d := (cpuNow() - start) / time.Duration(n); d < best {
				best = d
			}
		}
		t.Logf("%-28s %8d ns/op (thread CPU, best of 5)", name, best.Nanoseconds())
	}
	for _, c := range []struct{ name, in string }{{"holes", idsHoles}, {"fragmented", idsFragmented}} {
		s := idset.MustParse(c.in)
		run("IdsetParse16k/"+c.name, 200, func() { idset.Parse(c.in) })
		run("IdsetEncode16k/"+c.name, 200, func() { _ = s.String() })
	}
	for _, c := range []struct{ name, in string }{{"holes", hostsHoles}, {"fragmented", hostsFragmented}} {
		h, _ := hostlist.Parse(c.in)
		run("HostlistParse16k/"+c.name, 200, func() { hostlist.Parse(c.in) })
		run("HostlistEncode16k/"+c.name, 200, func() { _ = h.String() })
	}
}
