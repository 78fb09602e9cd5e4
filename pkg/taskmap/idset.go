package taskmap

import (
	"errors"
	"fmt"
	"strings"
)

// parseIDSet reads an RFC 22 idset string ("0-3,8", "[1,5-6]", or "" for
// the empty set) as inclusive ranges. Ids must be ascending and unique,
// decimal without leading zeros, and fit a signed 32-bit integer.
func parseIDSet(s string) ([][2]int, error) {
	if inner, ok := strings.CutPrefix(s, "["); ok {
		if s, ok = strings.CutSuffix(inner, "]"); !ok {
			return nil, errors.New(`idset has "[" without "]"`)
		}
	}
	if s == "" {
		return nil, nil
	}
	var ranges [][2]int
	prev := -1
	for _, part := range strings.Split(s, ",") {
		loS, hiS, isRange := strings.Cut(part, "-")
		lo, err := parseDecimal(loS)
		if err != nil {
			return nil, fmt.Errorf("idset %q: %v", s, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseDecimal(hiS); err != nil {
				return nil, fmt.Errorf("idset %q: %v", s, err)
			}
			if hi < lo {
				return nil, fmt.Errorf("idset %q: range %s is descending", s, part)
			}
		}
		if lo <= prev {
			return nil, fmt.Errorf("idset %q: ids are not ascending and unique", s)
		}
		ranges = append(ranges, [2]int{lo, hi})
		prev = hi
	}
	return ranges, nil
}

// parseDecimal reads a non-negative decimal integer below 2^31 with no
// sign and no leading zeros.
func parseDecimal(s string) (int, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", s)
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
		v = v*10 + int(c-'0')
		if v > MaxTasks {
			return 0, fmt.Errorf("%q is too large", s)
		}
	}
	return v, nil
}
