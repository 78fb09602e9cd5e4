package memo

import "testing"

func TestPutForgetsTheOldest(t *testing.T) {
	c := New[int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Put("a", 3) // already held: updated, keeps its place
	if v, ok := c.Lookup("a"); !ok || v != 3 {
		t.Fatalf("a = %d, %v", v, ok)
	}
	c.Put("c", 4) // forgets the oldest, a
	if _, ok := c.Lookup("a"); ok {
		t.Error("the oldest key was kept")
	}
	if v, ok := c.Lookup("b"); !ok || v != 2 || c.Len() != 2 {
		t.Errorf("b = %d, %v; %d keys", v, ok, c.Len())
	}
}

func TestGet(t *testing.T) {
	c := New[int](2)
	calls := 0
	count := func(b []byte) int { calls++; return len(b) }
	for _, s := range []string{"a", "bb", "a", "bb"} {
		if got := c.Get([]byte(s), count); got != len(s) {
			t.Fatalf("Get(%q) = %d", s, got)
		}
	}
	if calls != 2 {
		t.Fatalf("computed %d times, want 2", calls)
	}
	// the key is the text's value, not the caller's slice
	buf := []byte("ccc")
	c.Get(buf, count)
	buf[0] = 'x'
	if c.Get([]byte("ccc"), count) != 3 || calls != 3 {
		t.Fatalf("key changed with the caller's buffer (%d calls)", calls)
	}
}
