package mapshrink

import "testing"

func TestShrinkKeepsEntries(t *testing.T) {
	var p Peak
	m := make(map[int]string)
	for i := range 10000 {
		m[i] = "v"
		p.Note(len(m))
	}
	orig := m
	for i := range 9000 {
		delete(m, i)
		m = Shrink(&p, m)
	}
	if len(m) != 1000 {
		t.Fatalf("len %d after deletes, want 1000", len(m))
	}
	for i := 9000; i < 10000; i++ {
		if m[i] != "v" {
			t.Fatalf("entry %d lost by the copy", i)
		}
	}
	// 10000/8 = 1250: the copy was made when 1250 entries were left,
	// and later deletes went to the copy.
	if len(orig) != 1250 {
		t.Fatalf("original map holds %d entries, want 1250 (copied then)", len(orig))
	}
	if p.n != 1250 {
		t.Fatalf("peak restarted at %d, want the length at the copy (1250)", p.n)
	}
}

func TestShrinkLeavesSmallMaps(t *testing.T) {
	var p Peak
	m := map[int]int{1: 1, 2: 2}
	p.Note(len(m))
	delete(m, 1)
	m2 := Shrink(&p, m)
	m2[3] = 3
	if m[3] != 3 {
		t.Fatal("a small map was copied")
	}
}
