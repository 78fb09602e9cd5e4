package filearchive

import (
	"path"
	"strings"
	"testing"
)

// FuzzMatch: Match never panics, and on names without '/' (where
// fnmatch(3) and path.Match agree) it gives path.Match's answer for every
// pattern path.Match accepts.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"*.txt", "a.txt"}, {"[a-c]?x", "bzx"}, {"[!a]*", "ba"}, {`\[`, "["}, {"a*b*c*", "abcabc"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		got := Match(pattern, name)
		if strings.ContainsAny(name+pattern, "/-^]") {
			return // ranges and negation spellings differ at the edges
		}
		if want, err := path.Match(pattern, name); err == nil && got != want {
			t.Errorf("Match(%q, %q) = %v, path.Match says %v", pattern, name, got, want)
		}
	})
}
