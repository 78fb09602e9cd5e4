package resource

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/rset"
)

// FuzzNodeMeminfo: any meminfo text gives a memory within the bound or
// 0, never a panic.
func FuzzNodeMeminfo(f *testing.F) {
	f.Add("Node 0 MemTotal:       24683736 kB\nNode 0 MemFree:        16748784 kB\n")
	f.Add("Node 1 MemTotal: 18446744073709551615 kB\n")
	f.Add("Node 0 MemTotal: -5 kB\n")
	f.Fuzz(func(t *testing.T, text string) {
		if m := parseNodeMeminfo(text); m > rset.MaxDomainMemory {
			t.Fatalf("%q: %d bytes, above the bound", text, m)
		}
	})
}
