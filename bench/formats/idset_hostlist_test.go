package formats

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// Inputs of 16,384 elements, shaped like the broker ranks and node names
// of a large machine.
var (
	// idsHoles: ranks 0-16383 less every 97th (nodes down or drained):
	// 16,215 ids in 169 ranges.
	idsHoles = func() string {
		s := idset.Range(0, 16383)
		for r := uint(50); r < 16384; r += 97 {
			s.Remove(r)
		}
		return s.String()
	}()
	// idsFragmented: every other rank of 0-32767, 16,384 ranges of one id.
	idsFragmented = func() string {
		var s idset.Set
		for r := uint(0); r < 32768; r += 2 {
			s.Add(r)
		}
		return s.String()
	}()

	// hostsHoles: node0001-node16384 less every 97th node, one bracket
	// group of 169 ranges.
	hostsHoles = func() string {
		var b strings.Builder
		b.WriteString("node[")
		lo := 1
		for n := 1; n <= 16385; n++ {
			if n%97 == 50 || n == 16385 {
				if lo < n {
					if b.Len() > len("node[") {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, "%04d-%04d", lo, n-1)
				}
				lo = n + 1
			}
		}
		b.WriteString("]")
		return b.String()
	}()
	// hostsFragmented: 16,384 hosts no two of which are consecutive,
	// under two prefixes and with a suffix on some, so that every host is
	// its own range and groups change.
	hostsFragmented = func() string {
		hosts := make([]string, 0, 16384)
		for n := 0; len(hosts) < 16384; n += 2 {
			switch {
			case n%1000 < 500:
				hosts = append(hosts, fmt.Sprintf("node%05d", n))
			case n%1000 < 900:
				hosts = append(hosts, fmt.Sprintf("gpu%d", n))
			default:
				hosts = append(hosts, fmt.Sprintf("node%d-ib", n))
			}
		}
		return hostlist.New(hosts...).String()
	}()
)

func benchIdsetParse(b *testing.B, in string) {
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := idset.Parse(in); err != nil {
			b.Fatal(err)
		}
	}
}

func benchIdsetEncode(b *testing.B, in string) {
	s := idset.MustParse(in)
	for b.Loop() {
		if s.String() != in {
			b.Fatal("encoding differs from input")
		}
	}
}

func BenchmarkIdsetParse16k(b *testing.B) {
	b.Run("holes", func(b *testing.B) { benchIdsetParse(b, idsHoles) })
	b.Run("fragmented", func(b *testing.B) { benchIdsetParse(b, idsFragmented) })
}

func BenchmarkIdsetEncode16k(b *testing.B) {
	b.Run("holes", func(b *testing.B) { benchIdsetEncode(b, idsHoles) })
	b.Run("fragmented", func(b *testing.B) { benchIdsetEncode(b, idsFragmented) })
}

func benchHostlistParse(b *testing.B, in string) {
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		h, err := hostlist.Parse(in)
		if err != nil {
			b.Fatal(err)
		}
		if h.Len() < 16000 {
			b.Fatalf("parsed %d hosts", h.Len())
		}
	}
}

func benchHostlistEncode(b *testing.B, in string) {
	h, err := hostlist.Parse(in)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if h.String() != in {
			b.Fatal("encoding differs from input")
		}
	}
}

func BenchmarkHostlistParse16k(b *testing.B) {
	b.Run("holes", func(b *testing.B) { benchHostlistParse(b, hostsHoles) })
	b.Run("fragmented", func(b *testing.B) { benchHostlistParse(b, hostsFragmented) })
}

func BenchmarkHostlistEncode16k(b *testing.B) {
	b.Run("holes", func(b *testing.B) { benchHostlistEncode(b, hostsHoles) })
	b.Run("fragmented", func(b *testing.B) { benchHostlistEncode(b, hostsFragmented) })
}
