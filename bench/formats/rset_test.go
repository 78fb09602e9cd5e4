package formats

import (
	"fmt"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/rset"
)

// r16k is the R of a 16,384-node machine with 64 cores per node, as the
// resource module and a whole-machine job see it.
var r16k = []byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-16383","children":{"core":"0-63"}}],"nodelist":["node[0-16383]"],"starttime":0,"expiration":0}}`)

// r16kFragmented is the same machine written one R_lite entry per rank,
// the nodes having 64 different core sets: the worst case for decoding,
// which has to merge 16,384 entries into 64 groups.
var r16kFragmented = func() []byte {
	b := []byte(`{"version":1,"execution":{"R_lite":[`)
	for rank := range 16384 {
		if rank > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"rank":"%d","children":{"core":"0-%d"}}`, rank, rank%64)
	}
	return append(b, `],"nodelist":["node[0-16383]"],"starttime":0,"expiration":0}}`...)
}()

func BenchmarkRDecode16k(b *testing.B) {
	b.SetBytes(int64(len(r16k)))
	for b.Loop() {
		r, err := rset.Parse(r16k)
		if err != nil {
			b.Fatal(err)
		}
		if r.NCores() != 16384*64 {
			b.Fatalf("NCores = %d", r.NCores())
		}
	}
}

func BenchmarkREncode16k(b *testing.B) {
	r, err := rset.Parse(r16k)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(r16k)))
	for b.Loop() {
		_ = r.Encode()
	}
}

func BenchmarkRDecode16kFragmented(b *testing.B) {
	b.SetBytes(int64(len(r16kFragmented)))
	for b.Loop() {
		if _, err := rset.Parse(r16kFragmented); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRExpand16k(b *testing.B) {
	r, err := rset.Parse(r16k)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		n := 0
		for range r.All() {
			n++
		}
		if n != 16384 {
			b.Fatalf("%d nodes", n)
		}
	}
}

func BenchmarkRDifference16k(b *testing.B) {
	r, err := rset.Parse(r16k)
	if err != nil {
		b.Fatal(err)
	}
	f, err := rset.Parse(r16kFragmented)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if d := r.Difference(f); d.NNodes() != 16384-256 {
			b.Fatalf("difference has %d nodes", d.NNodes())
		}
	}
}
