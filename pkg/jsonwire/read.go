// Package jsonwire reads and writes the JSON of the job pipeline's hot
// message payloads without reflection. The job modules pass a jobspec,
// an R or a signed J through several hops for every job; encoding/json
// validates and copies such embedded documents at each hop and goes
// through maps for small contexts. Here a payload is scanned once, in
// one strict pass that checks the whole document (RFC 8259 grammar) and
// reports each top-level member with its raw value (Object, Array), or
// value by value for a decoder that builds a tree of its own (Reader);
// malformed JSON is a *SyntaxError saying what was wrong and where. This
// is the module's one JSON scanner: decoders say which members they
// expect and what to do with them, not how JSON is lexed. Payloads are
// built by appending to a byte slice, with encoding/json's formatting of
// strings and numbers so the bytes are what json.Marshal would produce.
package jsonwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// ErrSyntax is the kind of every error about malformed JSON or a value of
// the wrong type.
var ErrSyntax = errors.New("malformed JSON")

// MaxDepth bounds nesting, as encoding/json does: a top-level value is at
// depth 1, and an array or object deeper than MaxDepth is an error. A
// Reader may be given a lower bound.
const MaxDepth = 10000

const maxDepth = MaxDepth

func syntaxErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSyntax, fmt.Sprintf(format, args...))
}

// SyntaxError is the error for malformed JSON: what was wrong (Msg, for
// instance "expected ',' or '}' in object") and the byte offset in the
// scanned document where it was found. It wraps ErrSyntax.
type SyntaxError struct {
	Msg    string
	Offset int
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d", ErrSyntax, e.Msg, e.Offset)
}

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// errAt returns a *SyntaxError for offset off. (It is kept out of line
// so that the scanning functions that call it stay small enough to be
// inlined.)
//
//go:noinline
func errAt(off int, format string, args ...any) error {
	return &SyntaxError{Msg: fmt.Sprintf(format, args...), Offset: off}
}

// Object scans the JSON object p strictly and calls fn with each member's
// key (unescaped; valid only during the call) and raw value (a subslice
// of p). An error from fn stops the scan and is returned. A nil fn only
// checks that p is one well-formed object. Malformed JSON is a
// *SyntaxError.
func Object(p []byte, fn func(key, val []byte) error) error {
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return errAt(i, "want a JSON object")
	}
	end, err := members(p, i, 1, fn)
	if err != nil {
		return err
	}
	return trailing(p, end)
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
		return errAt(i, "want a JSON array")
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
		more, next, err := nextElement(p, end)
		if err != nil {
			return err
		}
		if !more {
			return trailing(p, next)
		}
		i = skipSpace(p, next)
	}
}

// Valid reports whether p is one well-formed JSON value (surrounding
// space allowed).
func Valid(p []byte) bool {
	i := skipSpace(p, 0)
	end, err := skipValue(p, i, 1)
	return err == nil && skipSpace(p, end) == len(p)
}

// The scanning functions below are the grammar, shared by the functions
// above and by Reader. Each takes the document and an offset and returns
// the offset after what it checked; their errors are *SyntaxErrors with
// the offset of the byte that broke the rule.

// trailing checks that only space follows offset i.
func trailing(p []byte, i int) error {
	if i = skipSpace(p, i); i != len(p) {
		return errAt(i, "unexpected data after the document")
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

func deepErr(off, limit int) error {
	return &SyntaxError{Msg: deepMsg(limit), Offset: off}
}

func deepMsg(limit int) string {
	return "nested too deeply (more than " + strconv.Itoa(limit) + " levels)"
}

// members scans the object starting at p[i] == '{' and returns the
// offset just past it; fn (if not nil) sees each member.
func members(p []byte, i, depth int, fn func(key, val []byte) error) (int, error) {
	if depth > maxDepth {
		return 0, deepErr(i, maxDepth)
	}
	i = skipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		return i + 1, nil
	}
	var kbuf []byte
	for {
		kend, holds, vstart, err := scanKey(p, i)
		if err != nil {
			return 0, err
		}
		key := p[i+1 : kend-1]
		if holds&strEscaped != 0 && fn != nil {
			kbuf, err = appendUnquoted(kbuf[:0], p[i:kend])
			if err != nil {
				return 0, err
			}
			key = kbuf
		}
		end, err := skipValue(p, vstart, depth+1)
		if err != nil {
			return 0, err
		}
		if fn != nil {
			if err := fn(key, p[vstart:end]); err != nil {
				return 0, err
			}
		}
		more, next, err := nextMember(p, end)
		if err != nil || !more {
			return next, err
		}
		i = skipSpace(p, next)
	}
}

// scanKey checks the member name at p[i] and the ':' after it, and
// returns the offset just past the name's closing quote, what the name
// holds (as scanString), and the offset of the member's value (past the
// ':' and any space).
func scanKey(p []byte, i int) (end int, holds int, val int, err error) {
	if i >= len(p) || p[i] != '"' {
		return 0, 0, 0, errAt(i, "expected a string key")
	}
	end, holds, err = scanString(p, i)
	if err != nil {
		return 0, 0, 0, err
	}
	j := skipSpace(p, end)
	if j >= len(p) || p[j] != ':' {
		return 0, 0, 0, errAt(j, "expected ':' after key")
	}
	return end, holds, skipSpace(p, j+1), nil
}

// nextMember checks what follows a member's value (which ends at i): a
// ',' (more true, next past it) or the object's '}' (more false, next
// past it).
func nextMember(p []byte, i int) (more bool, next int, err error) {
	i = skipSpace(p, i)
	if i >= len(p) {
		return false, 0, errAt(i, "unexpected end of input in object")
	}
	switch p[i] {
	case ',':
		return true, i + 1, nil
	case '}':
		return false, i + 1, nil
	}
	return false, 0, errAt(i, "expected ',' or '}' in object")
}

// nextElement is nextMember for an array.
func nextElement(p []byte, i int) (more bool, next int, err error) {
	i = skipSpace(p, i)
	if i >= len(p) {
		return false, 0, errAt(i, "unexpected end of input in array")
	}
	switch p[i] {
	case ',':
		return true, i + 1, nil
	case ']':
		return false, i + 1, nil
	}
	return false, 0, errAt(i, "expected ',' or ']' in array")
}

// skipValue checks the value starting at p[i] and returns the offset
// just past it.
func skipValue(p []byte, i, depth int) (int, error) {
	if i >= len(p) {
		return 0, errAt(i, "unexpected end of input")
	}
	switch c := p[i]; {
	case c == '"':
		end, _, err := scanString(p, i)
		return end, err
	case c == '{':
		return members(p, i, depth, nil)
	case c == '[':
		if depth > maxDepth {
			return 0, deepErr(i, maxDepth)
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
			more, next, err := nextElement(p, end)
			if err != nil || !more {
				return next, err
			}
			i = skipSpace(p, next)
		}
	case c == '-' || c >= '0' && c <= '9':
		end, _, err := scanNumber(p, i)
		return end, err
	case c == 't':
		return literal(p, i, "true")
	case c == 'f':
		return literal(p, i, "false")
	case c == 'n':
		return literal(p, i, "null")
	}
	return 0, badChar(p, i)
}

func badChar(p []byte, i int) error {
	return errAt(i, "invalid character %q looking for a value", p[i])
}

func literal(p []byte, i int, lit string) (int, error) {
	if len(p)-i >= len(lit) && string(p[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return 0, errAt(i, "invalid literal (want %s)", lit)
}

// What a scanned string holds besides plain ASCII: escapes, and bytes
// that are not ASCII (UTF-8, or not).
const (
	strEscaped  = 1
	strNonASCII = 2
)

// scanString checks the string starting at p[i] == '"' and returns the
// offset just past its closing quote and what it holds (strEscaped,
// strNonASCII). Its bytes are not checked to be UTF-8 (encoding/json
// accepts and replaces what is not).
//
// Plain bytes are skipped eight at a time while eight remain: the
// environment in a jobspec makes strings of kilobytes common, and keys
// and short values end within the first word.
func scanString(p []byte, i int) (end int, holds int, err error) {
	j := i + 1
	var seen uint64 // the plain bytes skipped, or-ed together
	for {
		for j+8 <= len(p) {
			v := binary.LittleEndian.Uint64(p[j:])
			// The high bit of each byte that is a '"', a '\\' or less
			// than 0x20. A borrow can mark a byte above the first one
			// marked, never one below it, so the lowest mark is exact.
			quote := v ^ ('"' * swarOnes)
			bslash := v ^ ('\\' * swarOnes)
			special := (quote - swarOnes) &^ quote
			special |= (bslash - swarOnes) &^ bslash
			special |= (v - 0x20*swarOnes) &^ v
			if special &= swarHigh; special != 0 {
				n := bits.TrailingZeros64(special) &^ 7 // bit offset of the byte
				seen |= v & (1<<n - 1)
				j += n >> 3
				break
			}
			seen |= v
			j += 8
		}
		if j >= len(p) {
			return 0, 0, errAt(len(p), "unterminated string")
		}
		switch c := p[j]; {
		case c == '"':
			if seen&swarHigh != 0 {
				holds |= strNonASCII
			}
			return j + 1, holds, nil
		case c == '\\':
			holds |= strEscaped
			if j+1 >= len(p) {
				return 0, 0, errAt(len(p), "unterminated string")
			}
			switch p[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if _, ok := hex4(p[j+2:]); !ok {
					return 0, 0, errAt(j+2, "invalid \\u escape")
				}
				j += 6
			default:
				return 0, 0, errAt(j, "invalid escape \\%c in string", p[j+1])
			}
		case c < 0x20:
			return 0, 0, errAt(j, "control character %q in string", c)
		default: // a plain byte among the last seven of p
			seen |= uint64(c)
			j++
		}
	}
}

// SWAR constants: a byte of ones, and the high bit of every byte.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

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

// scanNumber checks the number starting at p[i] and returns the offset
// just past it, and whether it has a fraction or an exponent.
func scanNumber(p []byte, i int) (end int, isFloat bool, err error) {
	if p[i] == '-' {
		i++
	}
	switch {
	case i < len(p) && p[i] == '0':
		i++
	case i < len(p) && p[i] >= '1' && p[i] <= '9':
		i = digits(p, i+1)
	default:
		return 0, false, errAt(i, "invalid number")
	}
	if i < len(p) && p[i] == '.' {
		d := i + 1
		if i = digits(p, d); i == d {
			return 0, false, errAt(i, "invalid number: digits expected after '.'")
		}
		isFloat = true
	}
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		d := i
		if i = digits(p, d); i == d {
			return 0, false, errAt(i, "invalid number: digits expected in exponent")
		}
		isFloat = true
	}
	return i, isFloat, nil
}

func digits(p []byte, i int) int {
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	return i
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
		// up to 19 digits cannot overflow
		if len(val) == 20 && n > (math.MaxUint64-d)/10 {
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
