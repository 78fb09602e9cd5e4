package jsonwire

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendString appends s as a JSON string exactly as json.Marshal writes
// it: HTML-sensitive characters and U+2028/U+2029 escaped, invalid UTF-8
// replaced by U+FFFD.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscaped(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendFloat appends f as json.Marshal formats a float64 (NaN and
// infinities, which JSON cannot hold, are written as null).
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// Real is a float64 that encodes as a JSON real even when it is
// integral (3600.0, not 3600), as jansson writes a real: readers that
// tell a real from an integer (a TOML float, a jobspec duration) see the
// type it had.
type Real float64

// MarshalJSON implements json.Marshaler.
func (r Real) MarshalJSON() ([]byte, error) {
	f := float64(r)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("json: unsupported value: %v", f)
	}
	b := AppendFloat(nil, f)
	for _, c := range b {
		if c == '.' || c == 'e' || c == 'E' {
			return b, nil
		}
	}
	return append(b, ".0"...), nil
}

// AppendInt appends an integer.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// AppendUint appends an unsigned integer.
func AppendUint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }

// AppendBool appends true or false.
func AppendBool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }

// AppendPlainString appends s as a JSON string the way jansson (and so
// flux-core) writes one: only the quote, the backslash and control
// characters are escaped; everything else, UTF-8 included, is copied as
// is. Eventlogs, KVS tree objects, R and job output use it so their bytes
// match flux-core's. A byte that is not part of valid UTF-8 (which
// jansson refuses to encode, and every JSON reader here refuses to read)
// becomes U+FFFD, as encoding/json writes it.
func AppendPlainString[T ~string | ~[]byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			// at most 4 bytes: converted on the stack
			if r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))])); r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscaped(dst, c)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscaped appends the JSON escape of ASCII byte c (a quote, a
// backslash, or a control character).
func appendEscaped(dst []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// WithMember returns a copy of the JSON object obj with the member
// key:val added last (val is JSON text): how an in-process attachment
// puts back the member its sender left out of a payload. A trailing NUL
// (a Flux JSON payload's terminator) is kept; an empty obj is {}.
func WithMember(obj []byte, key string, val []byte) ([]byte, error) {
	nul := len(obj) > 0 && obj[len(obj)-1] == 0
	if nul {
		obj = obj[:len(obj)-1]
	}
	end := len(obj)
	for end > 0 && isSpace(obj[end-1]) {
		end--
	}
	if end == 0 {
		obj, end = []byte("{}"), 2
	}
	empty := true
	if err := Object(obj, func(_, _ []byte) error { empty = false; return nil }); err != nil {
		return nil, fmt.Errorf("adding %q: %w", key, err)
	}
	b := make([]byte, 0, end+len(key)+len(val)+5)
	b = append(b, obj[:end-1]...)
	if !empty {
		b = append(b, ',')
	}
	b = AppendString(b, key)
	b = append(b, ':')
	b = append(b, val...)
	b = append(b, '}')
	if nul {
		b = append(b, 0)
	}
	return b, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
