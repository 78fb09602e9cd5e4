package treeobj

import (
	"slices"
	"testing"
)

func TestSplitKey(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want []string
	}{
		{"", nil},
		{".", nil},
		{"...", nil},
		{"a", []string{"a"}},
		{"a.b.c", []string{"a", "b", "c"}},
		{"..a..b.", []string{"a", "b"}},
		{"job.0000.0004.b200.0000.eventlog", []string{"job", "0000", "0004", "b200", "0000", "eventlog"}},
	} {
		if got := SplitKey(tt.key); !slices.Equal(got, tt.want) || (tt.want == nil && got != nil) {
			t.Errorf("SplitKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
