package idset

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every error Parse and UnmarshalJSON return.
var ErrInvalid = errors.New("invalid idset")

// invalid reports what is wrong with token tok, which starts at byte
// offset pos of the idset string s.
func invalid(s, tok string, pos int, why string) error {
	if len(s) > 64 {
		return fmt.Errorf("%w: %q at offset %d: %s", ErrInvalid, tok, pos, why)
	}
	return fmt.Errorf("%w %q: %q at offset %d: %s", ErrInvalid, s, tok, pos, why)
}

// Parse reads an RFC 22 idset string: comma-separated decimal ids and
// hyphenated ranges ("0-3,5,7-8"), optionally surrounded by one pair of
// square brackets ("[0-3,5]"). The empty string and "[]" are the empty
// set.
//
// Parse is strict about syntax: it rejects empty elements ("1,,2"),
// descending ranges ("3-1"), signs, leading zeros ("01"), whitespace,
// unbalanced or inner brackets and ids that overflow a uint; the error
// names the offending element and wraps ErrInvalid. RFC 22 asks writers
// for unique ids in ascending order; like Flux, Parse also accepts
// elements out of order, repeated or overlapping, and normalizes them.
func Parse(s string) (Set, error) {
	body, off := s, 0
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") || len(s) < 2 {
			return Set{}, invalid(s, s, 0, "'[' without a closing ']'")
		}
		body, off = s[1:len(s)-1], 1
	} else if strings.HasSuffix(s, "]") {
		return Set{}, invalid(s, s, 0, "']' without an opening '['")
	}
	if body == "" {
		return Set{}, nil
	}
	// One range per element at most; ranges merge, so give back the
	// excess of a large estimate at the end.
	out := Set{r: make([]Interval, 0, min(strings.Count(body, ",")+1, 1<<16))}
	sorted := true
	for pos := 0; pos <= len(body); {
		end := strings.IndexByte(body[pos:], ',')
		if end < 0 {
			end = len(body)
		} else {
			end += pos
		}
		tok := body[pos:end]
		lo, hi, err := parseElement(tok)
		if err != nil {
			return Set{}, invalid(s, tok, off+pos, err.Error())
		}
		if n := len(out.r); n > 0 && lo < out.r[n-1].Lo {
			sorted = false
		}
		if sorted {
			out.appendRange(lo, hi)
		} else {
			out.r = append(out.r, Interval{lo, hi})
		}
		pos = end + 1
	}
	if !sorted {
		out = normalize(out.r)
	}
	if cap(out.r) > 2*len(out.r)+8 {
		out.r = slices.Clone(out.r)
	}
	return out, nil
}

// normalize sorts arbitrary ranges and merges those that overlap or touch.
func normalize(rs []Interval) Set {
	slices.SortFunc(rs, func(a, b Interval) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	var out Set
	for _, iv := range rs {
		out.appendRange(iv.Lo, iv.Hi)
	}
	return out
}

// parseElement reads "N" or "N-M".
func parseElement(tok string) (lo, hi uint, err error) {
	if tok == "" {
		return 0, 0, errors.New("empty element")
	}
	a, b, isRange := strings.Cut(tok, "-")
	if lo, err = parseID(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseID(b); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, errors.New("range ends before it starts")
	}
	return lo, hi, nil
}

// parseID reads one decimal id without sign or leading zeros.
func parseID(s string) (uint, error) {
	if s == "" {
		return 0, errors.New("missing id")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < '0' || c > '9' {
			return 0, fmt.Errorf("unexpected character %q", c)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("id has a leading zero")
	}
	var n uint
	for i := 0; i < len(s); i++ {
		d := uint(s[i] - '0')
		if n > (math.MaxUint-d)/10 {
			return 0, errors.New("id out of range")
		}
		n = n*10 + d
	}
	return n, nil
}

// MustParse is like Parse but panics on error. It is meant for constants
// in programs and tests.
func MustParse(s string) Set {
	set, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return set
}

// String returns the canonical RFC 22 form of s: ascending, comma
// separated, consecutive ids as hyphenated ranges, no brackets
// ("0-3,5"). The empty set is "".
func (s Set) String() string { return s.Encode(false) }

// Encode returns the canonical form of s like String; with brackets true
// it surrounds the result with "[" and "]" when s has more than one id,
// as Flux does for display ("[0-3,5]", but "7").
func (s Set) Encode(brackets bool) string {
	brackets = brackets && len(s.r) > 0 && (len(s.r) > 1 || s.r[0].Lo != s.r[0].Hi)
	b := make([]byte, 0, 12*len(s.r)+2)
	if brackets {
		b = append(b, '[')
	}
	for i, iv := range s.r {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(iv.Lo), 10)
		if iv.Hi != iv.Lo {
			b = append(b, '-')
			b = strconv.AppendUint(b, uint64(iv.Hi), 10)
		}
	}
	if brackets {
		b = append(b, ']')
	}
	return string(b)
}

// MarshalText returns the canonical string form of s.
func (s Set) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText replaces s with the set Parse reads from text.
func (s *Set) UnmarshalText(text []byte) error {
	set, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = set
	return nil
}

// MarshalJSON encodes s as a JSON string in canonical form, "0-3,5".
func (s Set) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a JSON string holding an idset. JSON null leaves s
// unchanged; anything else, including a bare number, is an error wrapping
// ErrInvalid.
func (s *Set) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var str string
	if err := json.Unmarshal(data, &str); err != nil {
		return fmt.Errorf("%w: want a JSON string, got %.40s", ErrInvalid, data)
	}
	return s.UnmarshalText([]byte(str))
}
