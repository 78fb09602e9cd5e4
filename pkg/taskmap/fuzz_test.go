package taskmap

import (
	"errors"
	"slices"
	"testing"
)

// smallEnough bounds the maps whose every task and node the fuzz targets
// walk (the raw form lists every node, so a map with a few tasks on node
// 10^8 has a 100 MB raw form).
const smallEnough = 1 << 12

func small(m *Map) bool { return m.NTasks() <= smallEnough && m.NNodes() <= smallEnough }

func FuzzDecode(f *testing.F) {
	for _, v := range rfcVectors {
		f.Add([]byte(v.flux))
	}
	for _, s := range []string{
		`{"version":1,"map":[[0,4096,256,1]]}`, `{"version":1,"map":[[0,2,1,1],[2,2,1,1]]}`,
		`[[0,1,1,1],[0,1,1,1]]`, `[[3,1,2,4]]`, `[[0,65536,65536,1]]`, `[]`, `{"version":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode error %v does not wrap ErrInvalid", err)
			}
			return
		}
		checkMap(t, m)
		// The encoding decodes to the very same blocks.
		again, err := Decode([]byte(m.Encode()))
		if err != nil || !slices.Equal(again.Blocks(), m.Blocks()) {
			t.Fatalf("Decode(%s) = %v, %v", m.Encode(), again, err)
		}
		if !small(m) {
			return
		}
		// The raw and PMI forms describe the same mapping.
		raw, err := DecodeRaw(m.EncodeRaw())
		if err != nil {
			t.Fatalf("DecodeRaw(%q): %v", m.EncodeRaw(), err)
		}
		sameMapping(t, m, raw)
		pmi, err := DecodePMI(m.EncodePMI())
		if err != nil {
			t.Fatalf("DecodePMI(%q): %v", m.EncodePMI(), err)
		}
		sameMapping(t, m, pmi)
	})
}

func FuzzDecodeRaw(f *testing.F) {
	for _, v := range rfcVectors {
		f.Add(v.raw)
	}
	for _, s := range []string{"", ";", "[0-3];[4-7]", "0;;1", "0-2;1", "01", "(vector,(0,4,4))", "(vector,(0,6,1),(0,6,1),(4,2,1),(4,2,1))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, decode := range []func(string) (*Map, error){DecodeRaw, DecodePMI} {
			m, err := decode(s)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v does not wrap ErrInvalid", err)
				}
				continue
			}
			checkMap(t, m)
			again, err := Decode([]byte(m.Encode()))
			if err != nil || !slices.Equal(again.Blocks(), m.Blocks()) {
				t.Fatalf("Decode(%s) = %v, %v", m.Encode(), again, err)
			}
			if small(m) {
				raw, err := DecodeRaw(m.EncodeRaw())
				if err != nil {
					t.Fatalf("DecodeRaw(%q): %v", m.EncodeRaw(), err)
				}
				sameMapping(t, m, raw)
			}
		}
	})
}

// checkMap verifies a map's own consistency: block fields in range, the
// totals, and (for small maps) that NodeOfTask and TasksOnNode agree.
func checkMap(t *testing.T, m *Map) {
	t.Helper()
	total, nodes := 0, 0
	for _, b := range m.Blocks() {
		if b.NodeID < 0 || b.NNodes < 1 || b.PPN < 1 || b.Repeat < 1 {
			t.Fatalf("bad block %v in %s", b, m.Encode())
		}
		if b.NNodes == 1 && b.Repeat != 1 {
			t.Fatalf("single-node block %v keeps a repeat", b)
		}
		total += b.NNodes * b.PPN * b.Repeat
		nodes = max(nodes, b.NodeID+b.NNodes)
	}
	if total != m.NTasks() || nodes != m.NNodes() || total == 0 {
		t.Fatalf("%s: NTasks, NNodes = %d, %d; blocks say %d, %d", m.Encode(), m.NTasks(), m.NNodes(), total, nodes)
	}
	if !small(m) {
		return
	}
	seen := 0
	for node := 0; node < m.NNodes(); node++ {
		tasks, err := m.TasksOnNode(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if got, err := m.NodeOfTask(task); err != nil || got != node {
				t.Fatalf("%s: task %d listed on node %d, NodeOfTask = %d, %v", m.Encode(), task, node, got, err)
			}
		}
		seen += len(tasks)
	}
	if seen != m.NTasks() {
		t.Fatalf("%s: nodes list %d tasks, want %d", m.Encode(), seen, m.NTasks())
	}
}

func sameMapping(t *testing.T, a, b *Map) {
	t.Helper()
	if a.NTasks() != b.NTasks() {
		t.Fatalf("%s and %s: %d vs %d tasks", a.Encode(), b.Encode(), a.NTasks(), b.NTasks())
	}
	for task := range a.NTasks() {
		na, _ := a.NodeOfTask(task)
		nb, _ := b.NodeOfTask(task)
		if na != nb {
			t.Fatalf("%s and %s: task %d on node %d vs %d", a.Encode(), b.Encode(), task, na, nb)
		}
	}
}
