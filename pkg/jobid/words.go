package jobid

import (
	"fmt"
	"strings"
	"sync"
)

// The words encoding follows mnemonicode: the 8 bytes of the ID, least
// significant first, are taken as two little-endian 32-bit groups; each
// group x becomes three base-1626 digits x%1626, x/1626%1626, x/1626²,
// written as words. Words within a group are joined by "-", the two groups
// by "--": low group first.

const mnBase = 1626

var mnList = sync.OnceValue(func() []string { return strings.Fields(mnWords) })

// mnIndex maps a word to its digit value. The reserved 24-bit remainder
// words (index >= mnBase) are left out: a 64-bit ID never uses them.
// Built on first use, not at start-up: most commands never decode words.
var mnIndex = sync.OnceValue(func() map[string]uint32 {
	m := make(map[string]uint32, mnBase)
	for i, w := range mnList()[:mnBase] {
		m[w] = uint32(i)
	}
	return m
})

func encodeWords(id ID) string {
	var b strings.Builder
	b.Grow(48)
	for g := 0; g < 2; g++ {
		x := uint32(uint64(id) >> (32 * g))
		if g > 0 {
			b.WriteString("--")
		}
		b.WriteString(mnList()[x%mnBase])
		b.WriteByte('-')
		b.WriteString(mnList()[x/mnBase%mnBase])
		b.WriteByte('-')
		b.WriteString(mnList()[x/mnBase/mnBase])
	}
	return b.String()
}

// decodeWords accepts exactly "w-w-w--w-w-w"; words match without regard
// to ASCII case.
func decodeWords(s string) (ID, string) {
	groups := strings.Split(s, "--")
	if len(groups) != 2 {
		return 0, `words encoding must be two groups of three words joined by "--"`
	}
	var v uint64
	for g, group := range groups {
		words := strings.Split(group, "-")
		if len(words) != 3 {
			return 0, fmt.Sprintf(`words group %d must be three words joined by "-"`, g+1)
		}
		var x uint64
		for i := 2; i >= 0; i-- {
			d, ok := mnIndex()[asciiLower(words[i])]
			if !ok {
				return 0, fmt.Sprintf("%q is not a mnemonicode word", words[i])
			}
			x = x*mnBase + uint64(d)
		}
		if x > 1<<32-1 {
			return 0, fmt.Sprintf("words group %d encodes a value beyond 32 bits", g+1)
		}
		v |= x << (32 * g)
	}
	return ID(v), ""
}

// asciiLower lowercases ASCII letters only, so that no non-ASCII spelling
// (such as the Kelvin sign for "k") can pass for a word.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
