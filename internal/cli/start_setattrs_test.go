package cli

import (
	"slices"
	"testing"
)

// The test instance's topology comes from attributes given in any of
// the broker's spellings, -o included: a fanout the brokers use but
// flux start did not see sent every child to the wrong parent.
func TestSetattrsIn(t *testing.T) {
	args := []string{"-S", "a=1", "-Stbon.fanout=16", "--setattr", "b=2",
		"--setattr=c=3", "-c", "/etc/x", "--conf=y", "-S"}
	got := setattrsIn(args)
	want := []string{"a=1", "tbon.fanout=16", "b=2", "c=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("setattrsIn(%q) = %q, want %q", args, got, want)
	}
}
