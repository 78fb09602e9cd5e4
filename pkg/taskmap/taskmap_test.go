package taskmap

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// RFC 34's test vectors: raw task map and the Flux task map it compresses to.
var rfcVectors = []struct{ raw, flux string }{
	{"0", "[[0,1,1,1]]"},
	{"0;1", "[[0,2,1,1]]"},
	{"0-1", "[[0,1,2,1]]"},
	{"0-1;2-3", "[[0,2,2,1]]"},
	{"0,2;1,3", "[[0,2,1,2]]"},
	{"1;0", "[[1,1,1,1],[0,1,1,1]]"},
	{"0-3;4-7;8-11;12-15", "[[0,4,4,1]]"},
	{"0,4,8,12;1,5,9,13;2,6,10,14;3,7,11,15", "[[0,4,1,4]]"},
	{"0-1,8-9;2-3,10-11;4-5,12-13;6-7,14-15", "[[0,4,2,2]]"},
	{"0-1;2-3;4-5;6-7;8-11;12-15", "[[0,4,2,1],[4,2,4,1]]"},
	{"0,6;1,7;2,8;3,9;4,10,12,14;5,11,13,15", "[[0,6,1,2],[4,2,1,2]]"},
	{"14-15;12-13;10-11;8-9;4-7;0-3", "[[5,1,4,1],[4,1,4,1],[3,1,2,1],[2,1,2,1],[1,1,2,1],[0,1,2,1]]"},
	{"0-1;2-3;4-5;6-7;8-9;12-13;10-11;14-15", "[[0,5,2,1],[6,1,2,1],[5,1,2,1],[7,1,2,1]]"},
	{"12-15;8-11;4-7;0-3", "[[3,1,4,1],[2,1,4,1],[1,1,4,1],[0,1,4,1]]"},
}

func TestRFCVectors(t *testing.T) {
	for _, v := range rfcVectors {
		t.Run(v.raw, func(t *testing.T) {
			m, err := DecodeRaw(v.raw)
			if err != nil {
				t.Fatalf("DecodeRaw: %v", err)
			}
			if got := m.EncodeArray(); got != v.flux {
				t.Errorf("DecodeRaw(%q) compresses to %s, want %s", v.raw, got, v.flux)
			}
			m2, err := Decode([]byte(v.flux))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := m2.EncodeRaw(); got != v.raw {
				t.Errorf("Decode(%s).EncodeRaw() = %q, want %q", v.flux, got, v.raw)
			}
			if got := m2.EncodeArray(); got != v.flux {
				t.Errorf("Decode(%s) re-encodes as %s", v.flux, got)
			}
			// The explicit per-node form agrees.
			var lists [][]int
			for node := 0; node < m.NNodes(); node++ {
				tasks, err := m.TasksOnNode(node)
				if err != nil {
					t.Fatal(err)
				}
				lists = append(lists, tasks)
			}
			m3, err := FromNodeTasks(lists)
			if err != nil || m3.EncodeArray() != v.flux {
				t.Errorf("FromNodeTasks = %v, %v; want %s", m3, err, v.flux)
			}
		})
	}
}

// RFC 34's regular distributions, with the PMI form the RFC lists.
func TestRegularDistributions(t *testing.T) {
	mustMap := func(m *Map, err error) *Map {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name     string
		m        *Map
		flux     string
		pmi      string
		ntasks   int
		nnodes   int
		checkPMI bool
	}{
		{"4*4 block", mustMap(Block(4, 4)), "[[0,4,4,1]]", "(vector,(0,4,4))", 16, 4, true},
		{"4*4 cyclic:1", mustMap(Cyclic(4, 4, 1)), "[[0,4,1,4]]", "(vector,(0,4,1),(0,4,1),(0,4,1),(0,4,1))", 16, 4, true},
		{"4*4 cyclic:2", mustMap(Cyclic(4, 4, 2)), "[[0,4,2,2]]", "(vector,(0,4,2),(0,4,2))", 16, 4, true},
		{"4*2+2*4 block", mustMap(BlockCounts([]int{2, 2, 2, 2, 4, 4})), "[[0,4,2,1],[4,2,4,1]]", "(vector,(0,4,2),(4,2,4))", 16, 6, true},
		{"4*2+2*4 cyclic:1", mustMap(CyclicCounts([]int{2, 2, 2, 2, 4, 4}, 1)), "[[0,6,1,2],[4,2,1,2]]", "(vector,(0,6,1),(0,6,1),(4,2,1),(4,2,1))", 16, 6, true},
		{"4*2+2*4 cyclic:2", mustMap(CyclicCounts([]int{2, 2, 2, 2, 4, 4}, 2)), "[[0,6,2,1],[4,2,2,1]]", "(vector,(0,6,2),(4,2,2))", 16, 6, true},
		{"4096*256 block", mustMap(Block(4096, 256)), "[[0,4096,256,1]]", "(vector,(0,4096,256))", 4096 * 256, 4096, true},
		{"4096*256 cyclic:1", mustMap(Cyclic(4096, 256, 1)), "[[0,4096,1,256]]", "", 4096 * 256, 4096, false},
		{"4096*256 cyclic:2", mustMap(Cyclic(4096, 256, 2)), "[[0,4096,2,128]]", "", 4096 * 256, 4096, false},
		{"uneven cyclic:3", mustMap(Cyclic(2, 4, 3)), "[[0,2,3,1],[0,2,1,1]]", "(vector,(0,2,3),(0,2,1))", 8, 2, true},
		{"cyclic with gap", mustMap(CyclicCounts([]int{2, 0, 2}, 1)), "[[0,1,1,1],[2,1,1,1],[0,1,1,1],[2,1,1,1]]", "", 4, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.EncodeArray(); got != tt.flux {
				t.Errorf("map = %s, want %s", got, tt.flux)
			}
			if tt.m.NTasks() != tt.ntasks || tt.m.NNodes() != tt.nnodes {
				t.Errorf("NTasks, NNodes = %d, %d; want %d, %d", tt.m.NTasks(), tt.m.NNodes(), tt.ntasks, tt.nnodes)
			}
			if tt.pmi != "" {
				if got := tt.m.EncodePMI(); got != tt.pmi {
					t.Errorf("EncodePMI = %s, want %s", got, tt.pmi)
				}
			}
			if tt.checkPMI {
				back, err := DecodePMI(tt.m.EncodePMI())
				if err != nil || back.EncodeArray() != tt.flux {
					t.Errorf("DecodePMI(EncodePMI) = %v, %v", back, err)
				}
			}
		})
	}
}

func TestQueries(t *testing.T) {
	m, err := Decode([]byte(`{"version":1,"map":[[0,6,1,2],[4,2,1,2]]}`))
	if err != nil {
		t.Fatal(err)
	}
	wantNodes := []int{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 4, 5, 4, 5}
	for task, want := range wantNodes {
		if got, err := m.NodeOfTask(task); err != nil || got != want {
			t.Errorf("NodeOfTask(%d) = %d, %v; want %d", task, got, err, want)
		}
	}
	tasks, err := m.TasksOnNode(4)
	if err != nil || !slices.Equal(tasks, []int{4, 10, 12, 14}) {
		t.Errorf("TasksOnNode(4) = %v, %v", tasks, err)
	}
	if n, err := m.NTasksOnNode(5); err != nil || n != 4 {
		t.Errorf("NTasksOnNode(5) = %d, %v", n, err)
	}
	if s, err := m.TasksOnNodeIDSet(0); err != nil || s != "0,6" {
		t.Errorf("TasksOnNodeIDSet(0) = %q, %v", s, err)
	}
	cyc, _ := Cyclic(2, 8, 2)
	if s, _ := cyc.TasksOnNodeIDSet(1); s != "2-3,6-7,10-11,14-15" {
		t.Errorf("cyclic:2 TasksOnNodeIDSet(1) = %q", s)
	}
	blk, _ := Block(3, 4)
	if s, _ := blk.TasksOnNodeIDSet(2); s != "8-11" {
		t.Errorf("block TasksOnNodeIDSet(2) = %q", s)
	}
	for _, bad := range []int{-1, 16} {
		if _, err := m.NodeOfTask(bad); !errors.Is(err, ErrRange) {
			t.Errorf("NodeOfTask(%d) error = %v, want ErrRange", bad, err)
		}
	}
	for _, bad := range []int{-1, 6} {
		if _, err := m.TasksOnNode(bad); !errors.Is(err, ErrRange) {
			t.Errorf("TasksOnNode(%d) error = %v, want ErrRange", bad, err)
		}
		if _, err := m.TasksOnNodeIDSet(bad); !errors.Is(err, ErrRange) {
			t.Errorf("TasksOnNodeIDSet(%d) error = %v, want ErrRange", bad, err)
		}
	}
}

func TestJSONForms(t *testing.T) {
	m, err := Block(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Encode(); got != `{"version":1,"map":[[0,2,3,1]]}` {
		t.Errorf("Encode = %s", got)
	}
	if got := m.String(); got != m.Encode() {
		t.Errorf("String = %s", got)
	}
	// As it appears in a shell.start event context.
	var ctx struct {
		Taskmap *Map `json:"taskmap"`
	}
	in := `{"taskmap":{"version":1,"map":[[0,1,2,1]]}}`
	if err := json.Unmarshal([]byte(in), &ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Taskmap.NTasks() != 2 {
		t.Errorf("NTasks = %d", ctx.Taskmap.NTasks())
	}
	out, err := json.Marshal(ctx)
	if err != nil || string(out) != in {
		t.Errorf("Marshal = %s, %v; want %s", out, err, in)
	}
	if _, err := json.Marshal(&Map{}); err == nil {
		t.Error("Marshal of an empty map succeeded")
	}
}

func TestDecodeCompresses(t *testing.T) {
	tests := []struct{ in, want string }{
		{"[[0,2,1,1],[2,2,1,1]]", "[[0,4,1,1]]"},
		{"[[0,4,1,1],[0,4,1,1]]", "[[0,4,1,2]]"},
		{"[[0,4,1,2],[0,4,1,3]]", "[[0,4,1,5]]"},
		{"[[3,1,2,1],[3,1,1,1]]", "[[3,1,3,1]]"},
		{"[[3,1,2,4]]", "[[3,1,8,1]]"},
		{" [[0,1,1,1]] ", "[[0,1,1,1]]"},
	}
	for _, tt := range tests {
		m, err := Decode([]byte(tt.in))
		if err != nil {
			t.Fatalf("Decode(%s): %v", tt.in, err)
		}
		if got := m.EncodeArray(); got != tt.want {
			t.Errorf("Decode(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct{ in, why string }{
		{``, "not a JSON object or array"},
		{`7`, "not a JSON object or array"},
		{`[]`, "no blocks"},
		{`{"version":1,"map":[]}`, "no blocks"},
		{`{"version":1}`, `missing key "map"`},
		{`{"map":[[0,1,1,1]]}`, `missing key "version"`},
		{`{"version":2,"map":[[0,1,1,1]]}`, "version 2"},
		{`{"version":1.0,"map":[[0,1,1,1]]}`, "version 1.0"},
		{`{"version":1,"map":[[0,1,1,1]],"x":1}`, `unknown key "x"`},
		{`{"version":1,"map":null}`, "not an array of blocks"},
		{`[[0,1,1]]`, "not an array of 4 integers"},
		{`[[0,1,1,1,1]]`, "not an array of 4 integers"},
		{`[null]`, "not an array of 4 integers"},
		{`[[0,1,1.5,1]]`, "not a 32-bit integer"},
		{`[[0,1,1e2,1]]`, "not a 32-bit integer"},
		{`[[0,1,"1",1]]`, "not a 32-bit integer"},
		{`[[0,1,2147483648,1]]`, "not a 32-bit integer"},
		{`[[-1,1,1,1]]`, "nodeid must be >= 0"},
		{`[[0,0,1,1]]`, "nnodes must be >= 1"},
		{`[[0,1,0,1]]`, "ppn must be >= 1"},
		{`[[0,1,1,0]]`, "repeat must be >= 1"},
		{`[[0,65536,65536,1]]`, "more than"},
		{`[[2147483647,1,1,1]]`, "node IDs beyond"},
		{`[[0,1,1,1]] x`, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode error = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not mention %q", err, tt.why)
			}
		})
	}
}

func TestRawForms(t *testing.T) {
	accepts := []struct{ in, raw string }{
		{"[0-3];[4-7]", "0-3;4-7"},
		{"0,1,2;3", "0-2;3"},
		{"0;;1", "0;;1"},
		{"3-3;0-2", "3;0-2"},
	}
	for _, tt := range accepts {
		m, err := DecodeRaw(tt.in)
		if err != nil {
			t.Fatalf("DecodeRaw(%q): %v", tt.in, err)
		}
		if got := m.EncodeRaw(); got != tt.raw {
			t.Errorf("DecodeRaw(%q).EncodeRaw() = %q, want %q", tt.in, got, tt.raw)
		}
	}
	rejects := []struct{ in, why string }{
		{"", "no tasks"},
		{";", "no tasks"},
		{"1", "task 0 is missing"},
		{"0;0", "more than once"},
		{"0-2;1", "more than once"},
		{"0,2", "task 1 is missing"},
		{"01", "leading zero"},
		{"3-1", "descending"},
		{"2,1", "ascending"},
		{"1,1", "ascending"},
		{"[0", "without"},
		{"a", "not a decimal"},
		{"0-", "empty number"},
		{"-1", "empty number"},
		{"0-99999999999", "too large"},
		{"0, 1", "not a decimal"},
	}
	for _, tt := range rejects {
		_, err := DecodeRaw(tt.in)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("DecodeRaw(%q) error = %v, want ErrInvalid mentioning %q", tt.in, err, tt.why)
		}
	}
}

func TestPMIRejects(t *testing.T) {
	for _, in := range []string{
		"", "(vector)", "(vector,)", "vector,(0,1,1))", "(vector,(0,1,1)", "(vector,(0,1))",
		"(vector,(0,1,1),)", "(vector,(0,1,1)(1,1,1))", "(vector,(0,1,a))", "(vector,( 0,1,1))",
		"(vector,(0,0,1))", "(vector,(0,1,01))",
	} {
		if m, err := DecodePMI(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("DecodePMI(%q) = %v, %v; want ErrInvalid", in, m, err)
		}
	}
}

func TestConstructorErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   func() (*Map, error)
	}{
		{"block zero nodes", func() (*Map, error) { return Block(0, 4) }},
		{"block zero ppn", func() (*Map, error) { return Block(4, 0) }},
		{"block too big", func() (*Map, error) { return Block(1<<16, 1<<16) }},
		{"cyclic zero stride", func() (*Map, error) { return Cyclic(2, 2, 0) }},
		{"cyclic zero nodes", func() (*Map, error) { return Cyclic(0, 2, 1) }},
		{"cyclic too big", func() (*Map, error) { return Cyclic(1<<16, 1<<16, 1) }},
		{"counts negative", func() (*Map, error) { return BlockCounts([]int{1, -1}) }},
		{"counts empty", func() (*Map, error) { return BlockCounts(nil) }},
		{"cyclic counts negative", func() (*Map, error) { return CyclicCounts([]int{-1}, 1) }},
		{"cyclic counts zero", func() (*Map, error) { return CyclicCounts([]int{0, 0}, 1) }},
		{"node tasks duplicate", func() (*Map, error) { return FromNodeTasks([][]int{{0, 1}, {1}}) }},
		{"node tasks negative", func() (*Map, error) { return FromNodeTasks([][]int{{-1, 0}}) }},
		{"node tasks gap", func() (*Map, error) { return FromNodeTasks([][]int{{0}, {2}}) }},
		{"blocks empty", func() (*Map, error) { return FromBlocks(nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := tt.fn(); !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, %v; want ErrInvalid", m, err)
			}
		})
	}
}

func TestFromNodeTasksUnsorted(t *testing.T) {
	m, err := FromNodeTasks([][]int{{6, 0}, {7, 1}, {2, 8}, {3, 9}, {14, 12, 4, 10}, {5, 11, 13, 15}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.EncodeArray(); got != "[[0,6,1,2],[4,2,1,2]]" {
		t.Errorf("map = %s", got)
	}
	if got, want := m.Blocks(), []MapBlock{{0, 6, 1, 2}, {4, 2, 1, 2}}; !slices.Equal(got, want) {
		t.Errorf("Blocks() = %v, want %v", got, want)
	}
}

// Every constructor's map agrees with the definition: walking the blocks
// task by task gives the same nodes as NodeOfTask, and each node's task
// list matches TasksOnNode.
func TestCyclicMatchesDealing(t *testing.T) {
	for _, counts := range [][]int{{3, 1, 4, 1, 5}, {7}, {0, 2, 0, 3}, {5, 5, 5, 2}, {1, 2, 3, 4, 5, 6}} {
		for stride := 1; stride <= 4; stride++ {
			m, err := CyclicCounts(counts, stride)
			if err != nil {
				t.Fatal(err)
			}
			// Deal by hand.
			left := slices.Clone(counts)
			var want []int // node of each task
			for {
				dealt := false
				for node := range left {
					k := min(stride, left[node])
					for range k {
						want = append(want, node)
					}
					left[node] -= k
					dealt = dealt || k > 0
				}
				if !dealt {
					break
				}
			}
			checkNodes(t, m, want)
		}
	}
}

func checkNodes(t *testing.T, m *Map, want []int) {
	t.Helper()
	if m.NTasks() != len(want) {
		t.Fatalf("%s: NTasks = %d, want %d", m.EncodeArray(), m.NTasks(), len(want))
	}
	perNode := map[int][]int{}
	for task, node := range want {
		got, err := m.NodeOfTask(task)
		if err != nil || got != node {
			t.Fatalf("%s: NodeOfTask(%d) = %d, %v; want %d", m.EncodeArray(), task, got, err, node)
		}
		perNode[node] = append(perNode[node], task)
	}
	for node := 0; node < m.NNodes(); node++ {
		got, err := m.TasksOnNode(node)
		if err != nil || !slices.Equal(got, perNode[node]) {
			t.Fatalf("%s: TasksOnNode(%d) = %v, %v; want %v", m.EncodeArray(), node, got, err, perNode[node])
		}
	}
}

// Ids listed one by one ("0,1" rather than "0-1") still form one run per
// node, so the runs compress as if written as ranges. (Found by fuzzing.)
func TestRawCompresses(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"0,1,8,9;2,3,10,11;4,5,12,13;6,7", "[[0,4,2,1],[0,3,2,1]]"},
		{"0,1;2,3;4,5", "[[0,3,2,1]]"},
		{"0,1,2,3", "[[0,1,4,1]]"},
	}
	for _, tt := range tests {
		m, err := DecodeRaw(tt.raw)
		if err != nil {
			t.Fatalf("DecodeRaw(%q): %v", tt.raw, err)
		}
		if got := m.EncodeArray(); got != tt.want {
			t.Errorf("DecodeRaw(%q) = %s, want %s", tt.raw, got, tt.want)
		}
		again, err := Decode([]byte(m.Encode()))
		if err != nil || !slices.Equal(again.Blocks(), m.Blocks()) {
			t.Errorf("Decode(Encode()) = %v, %v; want %s", again, err, tt.want)
		}
	}
}
