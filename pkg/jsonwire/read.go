// Package jsonwire reads and writes the JSON of the job pipeline's hot
// message payloads without reflection. The job modules pass a jobspec,
// an R or a signed J through several hops for every job; encoding/json
// validates and copies such embedded documents at each hop and goes
// through maps for small contexts. Here a payload is scanned once, in
// one strict pass that checks the whole document (RFC 8259 grammar) and
// reports each top-level member with its raw value, and payloads are
// built by appending to a byte slice, with encoding/json's formatting of
// strings and numbers so the bytes are what json.Marshal would produce.
package jsonwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// ErrSyntax is the kind of every error about malformed JSON or a value of
// the wrong type.
var ErrSyntax = errors.New("malformed JSON")

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

func syntaxErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSyntax, fmt.Sprintf(format, args...))
}

// Object scans the JSON object p strictly and calls fn with each member's
// key (unescaped; valid only during the call) and raw value (a subslice
// of p). An error from fn stops the scan and is returned.
func Object(p []byte, fn func(key, val []byte) error) error {
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return syntaxErr("want a JSON object")
	}
	end, err := members(p, i, 1, fn)
	if err != nil {
		return err
	}
	if skipSpace(p, end) != len(p) {
		return syntaxErr("data after the object at offset %d", end)
	}
	return nil
}

// errFound stops Member's scan at the member it looks for.
var errFound = errors.New("found")

// Member returns the raw value of the member called name of the JSON
// object p (found false if it has none), scanning p only up to it.
func Member(p []byte, name string) (val []byte, found bool, err error) {
	err = Object(p, func(key, v []byte) error {
		if string(key) == name {
			val, found = v, true
			return errFound
		}
		return nil
	})
	if found {
		return val, true, nil
	}
	return nil, false, err
}

// Array scans the JSON array p strictly and calls fn with each element's
// raw value (a subslice of p).
func Array(p []byte, fn func(val []byte) error) error {
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '[' {
		return syntaxErr("want a JSON array")
	}
	i = skipSpace(p, i+1)
	if i < len(p) && p[i] == ']' {
		return trailing(p, i+1)
	}
	for {
		end, err := skipValue(p, i, 2) // the array is depth 1
		if err != nil {
			return err
		}
		if err := fn(p[i:end]); err != nil {
			return err
		}
		i = skipSpace(p, end)
		if i >= len(p) {
			return syntaxErr("unterminated array")
		}
		switch p[i] {
		case ',':
			i = skipSpace(p, i+1)
		case ']':
			return trailing(p, i+1)
		default:
			return syntaxErr("unexpected %q in array at offset %d", p[i], i)
		}
	}
}

// Valid reports whether p is one well-formed JSON value (surrounding
// space allowed).
func Valid(p []byte) bool {
	i := skipSpace(p, 0)
	end, err := skipValue(p, i, 1)
	return err == nil && skipSpace(p, end) == len(p)
}

func trailing(p []byte, i int) error {
	if skipSpace(p, i) != len(p) {
		return syntaxErr("data after the value at offset %d", i)
	}
	return nil
}

func skipSpace(p []byte, i int) int {
	for i < len(p) {
		switch p[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// members scans the object starting at p[i] == '{' and returns the
// offset just past it; fn (if not nil) sees each member.
func members(p []byte, i, depth int, fn func(key, val []byte) error) (int, error) {
	if depth > maxDepth {
		return 0, syntaxErr("nested too deeply")
	}
	i = skipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		return i + 1, nil
	}
	var kbuf []byte
	for {
		if i >= len(p) || p[i] != '"' {
			return 0, syntaxErr("want a member name at offset %d", i)
		}
		kend, escaped, err := scanString(p, i)
		if err != nil {
			return 0, err
		}
		key := p[i+1 : kend-1]
		if escaped && fn != nil {
			kbuf, err = appendUnquoted(kbuf[:0], p[i:kend])
			if err != nil {
				return 0, err
			}
			key = kbuf
		}
		i = skipSpace(p, kend)
		if i >= len(p) || p[i] != ':' {
			return 0, syntaxErr("want ':' after member %q", key)
		}
		i = skipSpace(p, i+1)
		end, err := skipValue(p, i, depth+1)
		if err != nil {
			return 0, err
		}
		if fn != nil {
			if err := fn(key, p[i:end]); err != nil {
				return 0, err
			}
		}
		i = skipSpace(p, end)
		if i >= len(p) {
			return 0, syntaxErr("unterminated object")
		}
		switch p[i] {
		case ',':
			i = skipSpace(p, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, syntaxErr("unexpected %q in object at offset %d", p[i], i)
		}
	}
}

// skipValue checks the value starting at p[i] and returns the offset
// just past it.
func skipValue(p []byte, i, depth int) (int, error) {
	if i >= len(p) {
		return 0, syntaxErr("missing value")
	}
	switch c := p[i]; {
	case c == '"':
		end, _, err := scanString(p, i)
		return end, err
	case c == '{':
		return members(p, i, depth, nil)
	case c == '[':
		if depth > maxDepth {
			return 0, syntaxErr("nested too deeply")
		}
		i = skipSpace(p, i+1)
		if i < len(p) && p[i] == ']' {
			return i + 1, nil
		}
		for {
			end, err := skipValue(p, i, depth+1)
			if err != nil {
				return 0, err
			}
			i = skipSpace(p, end)
			if i >= len(p) {
				return 0, syntaxErr("unterminated array")
			}
			switch p[i] {
			case ',':
				i = skipSpace(p, i+1)
			case ']':
				return i + 1, nil
			default:
				return 0, syntaxErr("unexpected %q in array at offset %d", p[i], i)
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(p, i)
	case c == 't':
		return literal(p, i, "true")
	case c == 'f':
		return literal(p, i, "false")
	case c == 'n':
		return literal(p, i, "null")
	}
	return 0, syntaxErr("unexpected %q at offset %d", p[i], i)
}

func literal(p []byte, i int, lit string) (int, error) {
	if len(p)-i >= len(lit) && string(p[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return 0, syntaxErr("bad literal at offset %d", i)
}

// scanString checks the string starting at p[i] == '"' and returns the
// offset just past its closing quote and whether it holds escapes.
func scanString(p []byte, i int) (end int, escaped bool, err error) {
	j := skipPlain(p, i+1)
	for j < len(p) {
		c := p[j]
		switch {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			if j+1 >= len(p) {
				return 0, false, syntaxErr("unterminated string")
			}
			switch p[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(p) {
					return 0, false, syntaxErr("short \\u escape at offset %d", j)
				}
				for _, h := range p[j+2 : j+6] {
					if unhex(h) < 0 {
						return 0, false, syntaxErr("bad \\u escape at offset %d", j)
					}
				}
				j += 6
			default:
				return 0, false, syntaxErr("bad escape at offset %d", j)
			}
		case c < 0x20:
			return 0, false, syntaxErr("control character in string at offset %d", j)
		default:
			j++
		}
	}
	return 0, false, syntaxErr("unterminated string")
}

// SWAR constants: a byte of ones, and the high bit of every byte.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// skipPlain returns the offset of the first byte at or after j that a
// string scan must look at ('"', '\\' or a control character), checking
// eight bytes at a time (the environment in a jobspec makes strings of
// kilobytes common). It may stop early, never late.
func skipPlain(p []byte, j int) int {
	for j+8 <= len(p) {
		v := binary.LittleEndian.Uint64(p[j:])
		quote := v ^ ('"' * swarOnes)
		bslash := v ^ ('\\' * swarOnes)
		special := (quote - swarOnes) &^ quote
		special |= (bslash - swarOnes) &^ bslash
		special |= (v - 0x20*swarOnes) &^ v
		if special&swarHigh != 0 {
			return j
		}
		j += 8
	}
	return j
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func scanNumber(p []byte, i int) (int, error) {
	start := i
	if p[i] == '-' {
		i++
	}
	switch {
	case i < len(p) && p[i] == '0':
		i++
	case i < len(p) && p[i] >= '1' && p[i] <= '9':
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			i++
		}
	default:
		return 0, syntaxErr("bad number at offset %d", start)
	}
	if i < len(p) && p[i] == '.' {
		i++
		d := i
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			i++
		}
		if i == d {
			return 0, syntaxErr("bad number at offset %d", start)
		}
	}
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		d := i
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			i++
		}
		if i == d {
			return 0, syntaxErr("bad number at offset %d", start)
		}
	}
	return i, nil
}

// appendUnquoted appends the text of the JSON string q (with quotes) to
// dst, as encoding/json decodes it (invalid UTF-8 and lone surrogates
// become U+FFFD).
func appendUnquoted(dst, q []byte) ([]byte, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return dst, syntaxErr("want a string")
	}
	s := q[1 : len(q)-1]
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return dst, syntaxErr("bad escape")
			}
			switch s[i+1] {
			case '"', '\\', '/':
				dst = append(dst, s[i+1])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				if i+2 > len(s) {
					return dst, syntaxErr("bad \\u escape")
				}
				r, ok := hex4(s[i+2:])
				if !ok {
					return dst, syntaxErr("bad \\u escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if r2, ok := hex4(s[i+2:]); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								dst = utf8.AppendRune(dst, dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default:
				return dst, syntaxErr("bad escape")
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return dst, nil
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		h := unhex(c)
		if h < 0 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// String decodes a JSON string value (already checked by a scan).
func String(val []byte) (string, error) {
	b, plain, err := stringBytes(val)
	if plain {
		return string(b), err
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), err
}

// StringBytes decodes a JSON string value to bytes: a subslice of val
// when the string holds no escapes and only ASCII (nothing to decode),
// else a new slice.
func StringBytes(val []byte) ([]byte, error) {
	b, _, err := stringBytes(val)
	return b, err
}

func stringBytes(val []byte) (b []byte, plain bool, err error) {
	if len(val) < 2 || val[0] != '"' {
		return nil, false, syntaxErr("want a string, got %.20q", val)
	}
	body := val[1 : len(val)-1]
	for _, c := range body {
		if c == '\\' || c >= utf8.RuneSelf {
			b, err := appendUnquoted(make([]byte, 0, len(body)), val)
			return b, false, err
		}
	}
	return body, true, nil
}

// Uint decodes a non-negative integer value.
func Uint(val []byte) (uint64, error) {
	if len(val) == 0 || len(val) > 20 {
		return 0, syntaxErr("want an unsigned integer, got %.20q", val)
	}
	var n uint64
	for _, c := range val {
		if c < '0' || c > '9' {
			return 0, syntaxErr("want an unsigned integer, got %.20q", val)
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, syntaxErr("integer %s is out of range", val)
		}
		n = n*10 + d
	}
	return n, nil
}

// Int decodes an integer value.
func Int(val []byte) (int64, error) {
	neg := len(val) > 0 && val[0] == '-'
	digits := val
	if neg {
		digits = val[1:]
	}
	u, err := Uint(digits)
	if err != nil {
		return 0, syntaxErr("want an integer, got %.20q", val)
	}
	if neg {
		if u > 1<<63 {
			return 0, syntaxErr("integer %s is out of range", val)
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, syntaxErr("integer %s is out of range", val)
	}
	return int64(u), nil
}

// Float decodes a number value.
func Float(val []byte) (float64, error) {
	if len(val) == 0 || !(val[0] == '-' || val[0] >= '0' && val[0] <= '9') {
		return 0, syntaxErr("want a number, got %.20q", val)
	}
	f, err := strconv.ParseFloat(unsafe.String(&val[0], len(val)), 64)
	if err != nil {
		return 0, syntaxErr("number %s: %v", val, err)
	}
	return f, nil
}

// Bool decodes true or false.
func Bool(val []byte) (bool, error) {
	switch string(val) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, syntaxErr("want true or false, got %.20q", val)
}

// IsNull reports whether a raw value is null.
func IsNull(val []byte) bool { return string(val) == "null" }
