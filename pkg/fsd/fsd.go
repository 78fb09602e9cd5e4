// Package fsd reads and writes Flux Standard Duration (RFC 23), the
// human-readable time span used on Flux command lines, in configuration
// and in message payloads: a non-negative floating point number with an
// optional unit suffix ("ms", "s", "m", "h" or "d"; seconds when absent),
// or "infinity".
//
// Durations are float64 seconds, as in jobspec and the Flux wire formats;
// ParseDuration and FormatDuration convert to and from time.Duration.
package fsd

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid Flux standard duration")

// Infinity is the duration "infinity" and "inf" parse to.
var Infinity = math.Inf(1)

// Unit multipliers in seconds, by suffix.
const (
	Millisecond = 0.001
	Second      = 1.0
	Minute      = 60.0
	Hour        = 60 * Minute
	Day         = 24 * Hour
)

func invalid(s, why string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalid, s, why)
}

// Parse returns the number of seconds s denotes. s is a decimal number
// (digits with an optional fraction and exponent, as strtod reads them but
// without a sign, hexadecimal or surrounding space) followed by an optional
// unit suffix, or "inf"/"infinity" in any case and without a suffix.
// The result is never negative or NaN; it is +Inf only for "infinity".
func Parse(s string) (float64, error) {
	if s == "" {
		return 0, invalid(s, "empty string")
	}
	if strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity") {
		return Infinity, nil
	}
	n := numberPrefix(s)
	if n == 0 {
		switch {
		case s[0] == '-':
			return 0, invalid(s, "negative durations are not allowed")
		case len(s) >= 3 && strings.EqualFold(s[:3], "nan"):
			return 0, invalid(s, "not a number")
		case len(s) >= 3 && strings.EqualFold(s[:3], "inf"):
			return 0, invalid(s, "infinity takes no unit suffix")
		}
		return 0, invalid(s, "must start with a number")
	}
	v, err := strconv.ParseFloat(s[:n], 64)
	if err != nil {
		// Only a range error is possible for a well-formed prefix.
		return 0, invalid(s, "number out of range")
	}
	mult := 1.0
	switch suffix := s[n:]; suffix {
	case "", "s":
	case "ms":
		mult = Millisecond
	case "m":
		mult = Minute
	case "h":
		mult = Hour
	case "d":
		mult = Day
	default:
		return 0, invalid(s, fmt.Sprintf("unknown unit suffix %q (want ms, s, m, h or d)", suffix))
	}
	v *= mult
	if math.IsInf(v, 0) {
		return 0, invalid(s, "number out of range")
	}
	return v, nil
}

// numberPrefix returns the length of the unsigned decimal floating point
// number at the start of s: digits, an optional '.' and digits (at least
// one digit in all), and an optional exponent. It returns 0 if s does not
// start with one.
func numberPrefix(s string) int {
	i := 0
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	// An exponent counts only when complete, as with strtod: "1e" is the
	// number 1 followed by the (invalid) suffix "e".
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k > j {
			i = k
		}
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Format returns sec as flux-core prints a duration: in milliseconds below
// 0.1s (except zero), in seconds below a minute, in minutes below an hour,
// in hours below a day and in days otherwise, with up to 6 significant
// digits ("30s", "1.5m", "2h", "100ms", "0s", "infinity").
// Format panics if sec is negative or NaN; use Valid to check first.
func Format(sec float64) string {
	return FormatPrecision(sec, 6)
}

// FormatPrecision is Format with at most prec significant digits
// (flux uptime and flux top use 2).
func FormatPrecision(sec float64, prec int) string {
	if math.IsInf(sec, 1) {
		return "infinity"
	}
	if !Valid(sec) {
		panic(fmt.Sprintf("fsd: cannot format invalid duration %v", sec))
	}
	if prec < 1 {
		prec = 1
	}
	var v float64
	var unit string
	switch {
	case sec != 0 && sec < 0.1:
		v, unit = sec/Millisecond, "ms"
	case sec < Minute:
		v, unit = sec, "s"
	case sec < Hour:
		v, unit = sec/Minute, "m"
	case sec < Day:
		v, unit = sec/Hour, "h"
	default:
		v, unit = sec/Day, "d"
	}
	return strconv.FormatFloat(v, 'g', prec, 64) + unit
}

// Valid reports whether sec is a duration FSD can express: not negative
// and not NaN (+Inf is valid).
func Valid(sec float64) bool {
	return !math.IsNaN(sec) && sec >= 0
}

// maxSeconds is the longest time.Duration in seconds.
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// ToDuration converts sec to a time.Duration, rounding to the nearest
// nanosecond. Durations too long for time.Duration (including infinity)
// saturate at the maximum time.Duration. sec must be Valid.
func ToDuration(sec float64) time.Duration {
	if sec >= maxSeconds {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(sec * float64(time.Second)))
}

// FromDuration converts d to seconds. The maximum time.Duration, which
// ToDuration returns for infinity, converts back to +Inf; negative
// durations are returned as they are (and are not Valid).
func FromDuration(d time.Duration) float64 {
	if d == time.Duration(math.MaxInt64) {
		return Infinity
	}
	return d.Seconds()
}

// ParseDuration parses s as Parse does and converts the result with
// ToDuration.
func ParseDuration(s string) (time.Duration, error) {
	sec, err := Parse(s)
	if err != nil {
		return 0, err
	}
	return ToDuration(sec), nil
}

// FormatDuration formats d as Format does. It panics if d is negative.
func FormatDuration(d time.Duration) string {
	return Format(FromDuration(d))
}
