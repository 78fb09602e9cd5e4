package jobid

import (
	"testing"
	"time"
)

var benchID = ID(6731191091817518)

func BenchmarkF58Encode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = benchID.String()
	}
}

func BenchmarkF58Decode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("ƒuZZybuNNy"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDec(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("6731191091817518"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWordsEncode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = benchID.Encode(Words)
	}
}

func BenchmarkWordsDecode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("reform-remote-galileo--heart-package-academy"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGeneratorNext(b *testing.B) {
	g, err := NewGenerator(0, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
