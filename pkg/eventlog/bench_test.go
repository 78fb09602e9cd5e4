package eventlog

import (
	"bytes"
	"io"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	data := readGolden(b, "exec.eventlog")
	n := bytes.Count(data, []byte("\n"))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		events, err := Parse(data)
		if err != nil || len(events) != n {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

func BenchmarkDecoder(b *testing.B) {
	data := readGolden(b, "exec.eventlog")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(bytes.NewReader(data))
		for {
			if _, err := d.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	events, err := Parse(readGolden(b, "exec.eventlog"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = buf[:0]
		for _, e := range events {
			if buf, err = Append(buf, e); err != nil {
				b.Fatal(err)
			}
		}
	}
}
