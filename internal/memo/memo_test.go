package memo

import "testing"

func TestCache(t *testing.T) {
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
	// full: a new text starts it over
	c.Get([]byte("ccc"), count)
	if c.Len() != 1 || calls != 3 {
		t.Fatalf("after overflow: %d held, %d calls", c.Len(), calls)
	}
	// the key is the text's value, not the slice
	buf := []byte("ccc")
	c.Get(buf, count)
	buf[0] = 'x'
	if c.Get([]byte("ccc"), count) != 3 || calls != 3 {
		t.Fatalf("key changed with the caller's buffer (%d calls)", calls)
	}
}
