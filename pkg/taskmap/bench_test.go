package taskmap

import "testing"

func BenchmarkDecode(b *testing.B) {
	data := []byte(`{"version":1,"map":[[0,6,1,2],[4,2,1,2]]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCyclic4096x256(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Cyclic(4096, 256, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNodeOfTask(b *testing.B) {
	m, err := Cyclic(4096, 256, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := m.NodeOfTask(i % m.NTasks()); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}
