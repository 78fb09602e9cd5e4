package jobingest

import "testing"

func TestRecent(t *testing.T) {
	r := newRecent[int](2)
	r.put("a", 1)
	r.put("b", 2)
	r.put("a", 3) // already held: updated, keeps its place
	if v, ok := r.get("a"); !ok || v != 3 {
		t.Fatalf("a = %d, %v", v, ok)
	}
	r.put("c", 4) // forgets the oldest, a
	if _, ok := r.get("a"); ok {
		t.Error("the oldest key was kept")
	}
	if v, ok := r.get("b"); !ok || v != 2 || r.len() != 2 {
		t.Errorf("b = %d, %v; %d keys", v, ok, r.len())
	}
}
