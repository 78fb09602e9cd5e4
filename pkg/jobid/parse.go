package jobid

import (
	"fmt"
	"strings"
)

// Parse decodes a job ID in any supported encoding. Leading and trailing
// white space is ignored. The encoding is chosen by the RFC 19 rules, in
// this order:
//
//   - a "job." prefix (the kvs encoding) must be followed by dothex;
//   - a string containing "." is dothex;
//   - else one containing "-" is words;
//   - else one starting with "ƒ" or "f" is F58;
//   - else one starting with the bytes F0 9F is emoji;
//   - else one starting with "0x" is hex;
//   - anything else is decimal.
//
// Errors wrap [ErrInvalid] and say which rule the string broke.
func Parse(s string) (ID, error) {
	t := strings.TrimSpace(s)
	var (
		id  ID
		why string
	)
	switch {
	case strings.HasPrefix(t, "job."):
		id, why = decodeDotHex(t[len("job."):])
	case strings.Contains(t, "."):
		id, why = decodeDotHex(t)
	case strings.Contains(t, "-"):
		id, why = decodeWords(t)
	case strings.HasPrefix(t, f58Prefix), strings.HasPrefix(t, "f"):
		id, why = decodeF58(t)
	case strings.HasPrefix(t, "\xf0\x9f"):
		id, why = decodeEmoji(t)
	case strings.HasPrefix(t, "0x"):
		id, why = decodeHex(t)
	default:
		id, why = decodeDec(t)
	}
	if why != "" {
		return 0, fmt.Errorf("%w %q: %s", ErrInvalid, s, why)
	}
	return id, nil
}

// ParseAs decodes s in the named encoding only (see [Encodings]); f58 and
// f58plain both accept either prefix. Leading and trailing white space is
// ignored.
func ParseAs(s, enc string) (ID, error) {
	t := strings.TrimSpace(s)
	var (
		id  ID
		why string
	)
	switch strings.ToLower(enc) {
	case Dec:
		id, why = decodeDec(t)
	case Hex:
		id, why = decodeHex(t)
	case DotHex:
		id, why = decodeDotHex(t)
	case KVS:
		rest, ok := strings.CutPrefix(t, "job.")
		if !ok {
			why = `kvs encoding must start with "job."`
			break
		}
		id, why = decodeDotHex(rest)
	case Words:
		id, why = decodeWords(t)
	case F58, F58Plain:
		id, why = decodeF58(t)
	case Emoji:
		id, why = decodeEmoji(t)
	default:
		return 0, fmt.Errorf("%w %q (want one of %s)", ErrUnknownEncoding, enc, strings.Join(Encodings(), ", "))
	}
	if why != "" {
		return 0, fmt.Errorf("%w %q: %s", ErrInvalid, s, why)
	}
	return id, nil
}

// MustParse is like [Parse] but panics on error. It is meant for tests and
// constants.
func MustParse(s string) ID {
	id, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return id
}

// The decoders below return the reason a string was rejected, or "".

func decodeDec(s string) (ID, string) {
	if s == "" {
		return 0, "empty string"
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("decimal encoding has non-digit %q", c)
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, "decimal value exceeds 64 bits"
		}
		v = v*10 + d
	}
	return ID(v), ""
}

func decodeHex(s string) (ID, string) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, `hex encoding must start with "0x"`
	}
	if digits == "" {
		return 0, `hex encoding has no digits after "0x"`
	}
	if len(digits) > 16 {
		return 0, "hex value exceeds 64 bits"
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		d, ok := hexValue(digits[i])
		if !ok {
			return 0, fmt.Sprintf("hex encoding has non-hex digit %q", digits[i])
		}
		v = v<<4 | d
	}
	return ID(v), ""
}

// decodeDotHex accepts exactly four dot-separated groups of one to four hex
// digits each ("0017.e9fb.8df1.6c2e", also "0.0.0.ffff").
func decodeDotHex(s string) (ID, string) {
	var v uint64
	groups := 0
	for rest := s; ; {
		group, tail, more := strings.Cut(rest, ".")
		groups++
		if groups > 4 {
			return 0, "dothex encoding has more than 4 groups"
		}
		if group == "" || len(group) > 4 {
			return 0, fmt.Sprintf("dothex group %d must have 1 to 4 hex digits", groups)
		}
		var g uint64
		for i := 0; i < len(group); i++ {
			d, ok := hexValue(group[i])
			if !ok {
				return 0, fmt.Sprintf("dothex group %d has non-hex digit %q", groups, group[i])
			}
			g = g<<4 | d
		}
		v = v<<16 | g
		if !more {
			break
		}
		rest = tail
	}
	if groups != 4 {
		return 0, fmt.Sprintf("dothex encoding has %d groups, want 4", groups)
	}
	return ID(v), ""
}

func hexValue(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}
