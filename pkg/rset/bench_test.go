package rset

import (
	"fmt"
	"strings"
	"testing"
)

// largeR is an R of n nodes written one R_lite entry per rank, as a
// scheduler that allocates nodes one by one writes it: every node has
// cores and GPUs, with a few distinct children shapes.
func largeR(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":1,"execution":{"R_lite":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		core, gpu := "0-63", "0-3"
		if i%16 == 15 {
			core, gpu = "0-31", "0-1"
		}
		fmt.Fprintf(&b, `{"rank":"%d","children":{"core":"%s","gpu":"%s"}}`, i, core, gpu)
	}
	fmt.Fprintf(&b, `],"starttime":0,"expiration":0,"nodelist":["node[0-%d]"]}}`, n-1)
	return []byte(b.String())
}

const smallR = `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-3","gpu":"0"}}],"starttime":0,"expiration":0,"nodelist":["node0"]}}`

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		doc  []byte
	}{
		{"large", largeR(16384)},
		{"small", []byte(smallR)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(bc.doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
