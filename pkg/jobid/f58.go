package jobid

import (
	"fmt"
	"strings"
)

// f58Alphabet is the RFC 19 base58 alphabet (no 0, O, I or l).
const f58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// f58MaxDigits is the most base58 digits a 64-bit value needs.
const f58MaxDigits = 11

// f58Value maps an ASCII byte to its base58 digit value, or -1.
var f58Value = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(f58Alphabet); i++ {
		t[f58Alphabet[i]] = int8(i)
	}
	return t
}()

// appendF58 appends prefix and the base58 digits of id, most significant
// first.
func appendF58(dst []byte, id ID, prefix string) []byte {
	var buf [f58MaxDigits]byte
	i := len(buf)
	v := uint64(id)
	for {
		i--
		buf[i] = f58Alphabet[v%58]
		v /= 58
		if v == 0 {
			break
		}
	}
	dst = append(dst, prefix...)
	return append(dst, buf[i:]...)
}

// decodeF58 accepts "ƒ" or "f" followed by one or more base58 digits.
// Leading zero digits ("1") are allowed, as Flux allows them.
func decodeF58(s string) (ID, string) {
	digits, ok := strings.CutPrefix(s, f58Prefix)
	if !ok {
		digits, ok = strings.CutPrefix(s, "f")
	}
	if !ok {
		return 0, `f58 encoding must start with "ƒ" or "f"`
	}
	if digits == "" {
		return 0, "f58 encoding has no digits after the prefix"
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		d := f58Value[digits[i]]
		if d < 0 {
			return 0, fmt.Sprintf("f58 encoding has %q, which is not in the base58 alphabet", digits[i])
		}
		if v > (1<<64-1-uint64(d))/58 {
			return 0, "f58 value exceeds 64 bits"
		}
		v = v*58 + uint64(d)
	}
	return ID(v), ""
}
