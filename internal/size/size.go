// Package size reads and writes sizes in bytes the way Flux
// configuration and shell options spell them: "512M", "1.5G", 4096.
package size

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/internal/valuekind"
)

// Parse reads a memory size: a number of bytes, optionally with a
// suffix K, M, G, T or P (powers of 1024; "KB"/"KiB" spellings and
// lower case are accepted), e.g. "512M", "1.5G". A JSON number is bytes.
func Parse(v any) (int64, error) {
	switch n := v.(type) {
	case float64, int, int64:
		b, err := Integer(n)
		if err != nil {
			return 0, err
		}
		if b <= 0 {
			return 0, fmt.Errorf("size %d: must be positive", b)
		}
		return b, nil
	case string:
		return parseSizeString(n)
	}
	return 0, fmt.Errorf("want a size such as \"512M\", not %s", valuekind.Of(v))
}

func parseSizeString(s string) (int64, error) {
	b, err := parseBytes(s)
	if err == nil && b < 1 {
		return 0, fmt.Errorf("size %q: out of range", s)
	}
	return b, err
}

// Bounded reads a size string as Parse does, allowing lo to hi bytes
// (0 included when lo is 0).
func Bounded(s string, lo, hi int64) (int64, error) {
	b, err := parseBytes(s)
	if err == nil && (b < lo || b > hi) {
		err = fmt.Errorf("size %q: want %s to %s", s, exact(lo), exact(hi))
	}
	return b, err
}

func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional K, M, G, T or P suffix", s)
	}
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "IB"), "B")
	mult := map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
	m, ok := mult[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want K, M, G, T or P)", s, strings.TrimSpace(t[i:]))
	}
	b := f * m
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: out of range", s)
	}
	return int64(b), nil
}

// exact is Format(b) when that reads back as b, else b in bytes.
func exact(b int64) string {
	if f := Format(b); !strings.Contains(f, ".") {
		return f
	}
	return strconv.FormatInt(b, 10) + " bytes"
}

// Format writes bytes the short way: "100M", "1.5G", "4096".
func Format(b int64) string {
	units := []struct {
		s string
		n int64
	}{{"P", 1 << 50}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}}
	for _, u := range units {
		if b >= u.n {
			if b%u.n == 0 {
				return strconv.FormatInt(b/u.n, 10) + u.s
			}
			return strconv.FormatFloat(float64(b)/float64(u.n), 'f', 1, 64) + u.s
		}
	}
	return strconv.FormatInt(b, 10)
}

// Integer reads a JSON or Go number that must be an integer.
func Integer(v any) (int64, error) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || n > math.MaxInt64 || n < math.MinInt64 {
			return 0, fmt.Errorf("%v is not an integer", n)
		}
		return int64(n), nil
	case int:
		return int64(n), nil
	case int64:
		return n, nil
	}
	return 0, fmt.Errorf("want an integer, not %s", valuekind.Of(v))
}
