package idset

import (
	"errors"
	"testing"
)

// FuzzParse checks that whatever Parse accepts prints in a canonical form
// that parses back to the same set and prints the same again, and that
// everything it rejects is reported as ErrInvalid.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "[]", "0", "0-3,5,7-8", "[0-3,5]", "5,3,1", "1,1,1", "0-5,3-8",
		"3-1", "1,,2", "-1", "a", "[1-3", "1-3]", "01", "+1", " 1",
		"18446744073709551615", "18446744073709551614-18446744073709551615,0",
		"18446744073709551616", "[[1]]", "1-2-3", "0-999999",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalid", in, err)
			}
			return
		}
		checkInvariant(t, s)
		str := s.String()
		again, err := Parse(str)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but Parse of its String %q: %v", in, str, err)
		}
		if !again.Equal(s) || again.String() != str {
			t.Fatalf("round trip of %q: %q became %q", in, str, again)
		}
		brk := s.Encode(true)
		if b, err := Parse(brk); err != nil || !b.Equal(s) {
			t.Fatalf("round trip of bracketed %q: %q, %v", brk, b, err)
		}
	})
}
