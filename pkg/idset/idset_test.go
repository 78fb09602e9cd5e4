package idset

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in    string
		want  string
		count int
	}{
		{"", "", 0},
		{"[]", "", 0},
		{"0", "0", 1},
		{"[7]", "7", 1},
		{"0-3,5,7-8", "0-3,5,7-8", 7},
		{"[0-3,5]", "0-3,5", 5},
		{"1,2,3,5,6,42", "1-3,5-6,42", 6},
		{"1-3,5-6,42", "1-3,5-6,42", 6},
		{"3-3", "3", 1},
		{"0-999999", "0-999999", 1000000},
		// Out of order, repeated and overlapping elements are normalized.
		{"5,3,1", "1,3,5", 3},
		{"1,1,1", "1", 1},
		{"0-5,3-8", "0-8", 9},
		{"4-6,0-3", "0-6", 7},
		{"10,0-3,4,2", "0-4,10", 6},
		{"18446744073709551615", "18446744073709551615", 1},
		{"18446744073709551614-18446744073709551615,0", "0,18446744073709551614-18446744073709551615", 3},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
			if got := s.Count(); got != tt.count {
				t.Errorf("Parse(%q).Count() = %d, want %d", tt.in, got, tt.count)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, token string // token: the element the error must name
	}{
		{"3-1", `"3-1"`},
		{"1,,2", `""`},
		{"1,", `""`},
		{",1", `""`},
		{"-1", `"-1"`},
		{"a", `"a"`},
		{"1,a", `"a"`},
		{"[1-3", `"[1-3"`},
		{"1-3]", `"1-3]"`},
		{"[", `"["`},
		{"]", `"]"`},
		{"[[1]]", `"[1]"`},
		{"1 ", `"1 "`},
		{" 1", `" 1"`},
		{"1, 2", `" 2"`},
		{"+1", `"+1"`},
		{"01", `"01"`},
		{"1-02", `"1-02"`},
		{"1-", `"1-"`},
		{"1-2-3", `"1-2-3"`},
		{"18446744073709551616", `"18446744073709551616"`},
		{"0x10", `"0x10"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error", tt.in, s)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%q) error %v does not wrap ErrInvalid", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.token) {
				t.Errorf("Parse(%q) error %q does not name %s", tt.in, err, tt.token)
			}
		})
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse(\"x\") did not panic")
		}
	}()
	MustParse("x")
}

func TestEncode(t *testing.T) {
	tests := []struct {
		set        Set
		plain, brk string
	}{
		{Set{}, "", ""},
		{New(7), "7", "7"},
		{New(1, 2), "1-2", "[1-2]"},
		{New(1, 3), "1,3", "[1,3]"},
		{MustParse("0-3,5"), "0-3,5", "[0-3,5]"},
	}
	for _, tt := range tests {
		t.Run(tt.plain, func(t *testing.T) {
			if got := tt.set.Encode(false); got != tt.plain {
				t.Errorf("Encode(false) = %q, want %q", got, tt.plain)
			}
			if got := tt.set.String(); got != tt.plain {
				t.Errorf("String() = %q, want %q", got, tt.plain)
			}
			if got := tt.set.Encode(true); got != tt.brk {
				t.Errorf("Encode(true) = %q, want %q", got, tt.brk)
			}
		})
	}
}

func TestConstructors(t *testing.T) {
	tests := []struct {
		name string
		set  Set
		want string
	}{
		{"New()", New(), ""},
		{"New unsorted", New(9, 1, 2, 3, 1, 7), "1-3,7,9"},
		{"New sorted", New(0, 1, 2, 4), "0-2,4"},
		{"Range", Range(4, 9), "4-9"},
		{"Range single", Range(4, 4), "4"},
		{"Range empty", Range(5, 4), ""},
		{"Range max", Range(math.MaxUint, math.MaxUint), "18446744073709551615"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.set.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQueries(t *testing.T) {
	s := MustParse("2-4,7,10-12")
	for id, want := range map[uint]bool{0: false, 2: true, 3: true, 4: true, 5: false, 7: true, 8: false, 12: true, 13: false} {
		if got := s.Contains(id); got != want {
			t.Errorf("Contains(%d) = %v, want %v", id, got, want)
		}
	}
	if id, ok := s.First(); !ok || id != 2 {
		t.Errorf("First() = %d, %v; want 2, true", id, ok)
	}
	if id, ok := s.Last(); !ok || id != 12 {
		t.Errorf("Last() = %d, %v; want 12, true", id, ok)
	}
	want := []uint{2, 3, 4, 7, 10, 11, 12}
	for n, w := range want {
		if id, ok := s.Nth(n); !ok || id != w {
			t.Errorf("Nth(%d) = %d, %v; want %d, true", n, id, ok, w)
		}
	}
	for _, n := range []int{-1, 7, 100} {
		if id, ok := s.Nth(n); ok {
			t.Errorf("Nth(%d) = %d, true; want false", n, id)
		}
	}
	if got := slices.Collect(s.All()); !slices.Equal(got, want) {
		t.Errorf("All() = %v, want %v", got, want)
	}
	if got, want := s.Ranges(), []Interval{{2, 4}, {7, 7}, {10, 12}}; !slices.Equal(got, want) {
		t.Errorf("Ranges() = %v, want %v", got, want)
	}
	var empty Set
	if !empty.Empty() || empty.Count() != 0 || empty.String() != "" {
		t.Error("zero Set is not empty")
	}
	if _, ok := empty.First(); ok {
		t.Error("First() of empty set reports ok")
	}
	if _, ok := empty.Last(); ok {
		t.Error("Last() of empty set reports ok")
	}
	if empty.Ranges() != nil {
		t.Error("Ranges() of empty set is not nil")
	}
	// Stopping the iterator early.
	for id := range s.All() {
		if id != 2 {
			t.Errorf("first id from All() = %d, want 2", id)
		}
		break
	}
	// An iterator over a range that ends at the largest uint terminates.
	if got := slices.Collect(Range(math.MaxUint-1, math.MaxUint).All()); len(got) != 2 {
		t.Errorf("All() over the top of the uint range = %v", got)
	}
}

func TestCountSaturates(t *testing.T) {
	if got := Range(0, math.MaxUint).Count(); got != math.MaxInt {
		t.Errorf("Count() of the whole uint range = %d, want MaxInt", got)
	}
	s := Range(0, math.MaxInt-1)
	s.AddRange(math.MaxInt+1, math.MaxInt+10)
	if got := s.Count(); got != math.MaxInt {
		t.Errorf("Count() = %d, want MaxInt", got)
	}
}

func TestMutations(t *testing.T) {
	tests := []struct {
		name  string
		start string
		op    func(*Set)
		want  string
	}{
		{"Add to empty", "", func(s *Set) { s.Add(3) }, "3"},
		{"Add joins left", "1-3", func(s *Set) { s.Add(4) }, "1-4"},
		{"Add joins right", "5-6", func(s *Set) { s.Add(4) }, "4-6"},
		{"Add bridges", "1-3,5-6", func(s *Set) { s.Add(4) }, "1-6"},
		{"Add inside", "1-6", func(s *Set) { s.Add(4) }, "1-6"},
		{"Add apart", "1,9", func(s *Set) { s.Add(5) }, "1,5,9"},
		{"Add zero", "1-2", func(s *Set) { s.Add(0) }, "0-2"},
		{"Add max", "18446744073709551614", func(s *Set) { s.Add(math.MaxUint) }, "18446744073709551614-18446744073709551615"},
		{"AddRange spanning", "1,3,5,7,20", func(s *Set) { s.AddRange(2, 8) }, "1-8,20"},
		{"AddRange reversed is no-op", "1", func(s *Set) { s.AddRange(8, 2) }, "1"},
		{"AddRange up to max", "0,5", func(s *Set) { s.AddRange(3, math.MaxUint) }, "0,3-18446744073709551615"},
		{"Remove absent", "1-3", func(s *Set) { s.Remove(9) }, "1-3"},
		{"Remove splits", "1-5", func(s *Set) { s.Remove(3) }, "1-2,4-5"},
		{"Remove low end", "1-5", func(s *Set) { s.Remove(1) }, "2-5"},
		{"Remove high end", "1-5", func(s *Set) { s.Remove(5) }, "1-4"},
		{"Remove only", "7", func(s *Set) { s.Remove(7) }, ""},
		{"RemoveRange across", "0-3,5,7-10", func(s *Set) { s.RemoveRange(2, 8) }, "0-1,9-10"},
		{"RemoveRange all", "0-3,5,7-10", func(s *Set) { s.RemoveRange(0, 100) }, ""},
		{"RemoveRange between", "0-3,10", func(s *Set) { s.RemoveRange(5, 8) }, "0-3,10"},
		{"RemoveRange reversed is no-op", "0-3", func(s *Set) { s.RemoveRange(2, 1) }, "0-3"},
		{"RemoveRange max", "0-18446744073709551615", func(s *Set) { s.RemoveRange(1, math.MaxUint) }, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MustParse(tt.start)
			tt.op(&s)
			if got := s.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			checkInvariant(t, s)
		})
	}
}

func TestSetOps(t *testing.T) {
	tests := []struct {
		a, b                   string
		union, inter, diff, rd string // rd: b minus a
	}{
		{"", "", "", "", "", ""},
		{"0-3", "", "0-3", "", "0-3", ""},
		{"0-3", "2-5", "0-5", "2-3", "0-1", "4-5"},
		{"0-3", "4-5", "0-5", "", "0-3", "4-5"},
		{"0-10", "2,4,6-7", "0-10", "2,4,6-7", "0-1,3,5,8-10", ""},
		{"1,3,5", "2,4,6", "1-6", "", "1,3,5", "2,4,6"},
		{"0-5,10-15", "3-12", "0-15", "3-5,10-12", "0-2,13-15", "6-9"},
	}
	for _, tt := range tests {
		t.Run(tt.a+"|"+tt.b, func(t *testing.T) {
			a, b := MustParse(tt.a), MustParse(tt.b)
			check := func(op string, got Set, want string) {
				t.Helper()
				if got.String() != want {
					t.Errorf("%s = %q, want %q", op, got, want)
				}
				checkInvariant(t, got)
			}
			check("a.Union(b)", a.Union(b), tt.union)
			check("b.Union(a)", b.Union(a), tt.union)
			check("a.Intersect(b)", a.Intersect(b), tt.inter)
			check("b.Intersect(a)", b.Intersect(a), tt.inter)
			check("a.Difference(b)", a.Difference(b), tt.diff)
			check("b.Difference(a)", b.Difference(a), tt.rd)
			if a.String() != tt.a || b.String() != tt.b {
				t.Errorf("operands changed: %q %q", a, b)
			}
		})
	}
}

func TestEqualClone(t *testing.T) {
	a := MustParse("1-3,5")
	b := a.Clone()
	if !a.Equal(b) {
		t.Fatal("clone is not Equal")
	}
	b.Add(4)
	if a.String() != "1-3,5" {
		t.Errorf("changing a clone changed the original: %q", a)
	}
	if a.Equal(b) {
		t.Error("different sets are Equal")
	}
	if !New().Equal(Set{}) || !MustParse("1,2").Difference(MustParse("1-2")).Equal(Set{}) {
		t.Error("empty sets are not Equal")
	}
}

func TestJSON(t *testing.T) {
	type doc struct {
		Ranks Set  `json:"ranks"`
		Opt   *Set `json:"opt,omitempty"`
	}
	in := doc{Ranks: MustParse("0-3,7")}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `{"ranks":"0-3,7"}`; got != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	var out doc
	if err := json.Unmarshal([]byte(`{"ranks":"[7,0-3]"}`), &out); err != nil {
		t.Fatal(err)
	}
	if !out.Ranks.Equal(in.Ranks) {
		t.Errorf("Unmarshal = %q, want %q", out.Ranks, in.Ranks)
	}
	for _, bad := range []string{`{"ranks":3}`, `{"ranks":"3-1"}`, `{"ranks":["1"]}`} {
		err := json.Unmarshal([]byte(bad), &out)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Unmarshal(%s) error = %v, want ErrInvalid", bad, err)
		}
	}
	keep := MustParse("4")
	if err := keep.UnmarshalJSON([]byte("null")); err != nil || keep.String() != "4" {
		t.Errorf("UnmarshalJSON(null) = %v, set %q; want no change", err, keep)
	}
}

func TestMillionIDs(t *testing.T) {
	s := Range(0, 999_999)
	if s.Count() != 1_000_000 || len(s.r) != 1 {
		t.Fatalf("Range(0, 999999): count %d, %d ranges", s.Count(), len(s.r))
	}
	p := MustParse("0-999999")
	if !p.Equal(s) || p.String() != "0-999999" {
		t.Fatalf("Parse(\"0-999999\") = %q", p)
	}
	// Remove every even id below 1000 and a block in the middle.
	for id := uint(0); id < 1000; id += 2 {
		s.Remove(id)
	}
	s.RemoveRange(500_000, 599_999)
	if got, want := s.Count(), 1_000_000-500-100_000; got != want {
		t.Errorf("Count() = %d, want %d", got, want)
	}
	if id, _ := s.Nth(500); id != 1000 {
		t.Errorf("Nth(500) = %d, want 1000", id)
	}
	if s.Contains(550_000) || !s.Contains(999_999) {
		t.Error("Contains wrong after RemoveRange")
	}
	u := s.Union(Range(0, 999_999))
	if u.String() != "0-999999" {
		t.Errorf("Union = %q", u)
	}
	checkInvariant(t, s)
}

// checkInvariant fails the test unless s's ranges are sorted, disjoint
// and non-adjacent, with nil for the empty set.
func checkInvariant(t *testing.T, s Set) {
	t.Helper()
	if s.r != nil && len(s.r) == 0 {
		t.Errorf("empty set with non-nil ranges")
	}
	for i, iv := range s.r {
		if iv.Hi < iv.Lo {
			t.Errorf("range %d is reversed: %v", i, iv)
		}
		if i > 0 && s.r[i-1].Hi+1 >= iv.Lo {
			t.Errorf("ranges %d and %d overlap or touch: %v %v", i-1, i, s.r[i-1], iv)
		}
	}
}
