package fsd

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"0", 0},
		{"30", 30},
		{"30s", 30},
		{"1.5m", 90},
		{"2h", 7200},
		{"1d", 86400},
		{"0.001s", 0.001},
		{"100ms", 0.1},
		{"0ms", 0},
		{".5", 0.5},
		{"5.", 5},
		{"1e3", 1000},
		{"1E3", 1000},
		{"1e+2m", 6000},
		{"1e-3", 0.001},
		{"1e-400", 0},
		{"inf", math.Inf(1)},
		{"infinity", math.Inf(1)},
		{"INF", math.Inf(1)},
		{"Infinity", math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got != tt.want && math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, why string
	}{
		{"", "empty"},
		{"-1", "negative"},
		{"-0", "negative"},
		{"-1s", "negative"},
		{"nan", "not a number"},
		{"NaN", "not a number"},
		{"3x", `unknown unit suffix "x"`},
		{"1sec", "unknown unit suffix"},
		{"1S", "unknown unit suffix"},
		{"1 s", "unknown unit suffix"},
		{"1s ", "unknown unit suffix"},
		{" 1", "must start with a number"},
		{"+1", "must start with a number"},
		{"s", "must start with a number"},
		{".", "must start with a number"},
		{"1e", "unknown unit suffix"},
		{"0x10", "unknown unit suffix"},
		{"infs", "infinity takes no unit suffix"},
		{"infm", "infinity takes no unit suffix"},
		{"1e400", "out of range"},
		{"1e306d", "out of range"},
		{"1.5.5", "unknown unit suffix"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error", tt.in)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%q) error %v does not wrap ErrInvalid", tt.in, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"`+tt.in+`"`) {
				t.Errorf("error %q does not name the value %q", msg, tt.in)
			}
			if !strings.Contains(msg, tt.why) {
				t.Errorf("error %q does not say %q", msg, tt.why)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   float64
		prec int
		want string
	}{
		{0, 6, "0s"},
		{30, 6, "30s"},
		{0.1, 6, "0.1s"},
		{0.05, 6, "50ms"},
		{0.001, 6, "1ms"},
		{1.234e-5, 6, "0.01234ms"},
		{59.9, 6, "59.9s"},
		{60, 6, "1m"},
		{90, 6, "1.5m"},
		{3600, 6, "1h"},
		{7200, 6, "2h"},
		{86400, 6, "1d"},
		{86400 * 1.5, 6, "1.5d"},
		{1e12, 6, "1.15741e+07d"},
		{1.23456789, 6, "1.23457s"},
		{1.23456789, 2, "1.2s"},
		{4000, 2, "1.1h"},
		{math.Inf(1), 6, "infinity"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := FormatPrecision(tt.in, tt.prec); got != tt.want {
				t.Errorf("FormatPrecision(%v, %d) = %q, want %q", tt.in, tt.prec, got, tt.want)
			}
		})
	}
	if got := Format(90); got != "1.5m" {
		t.Errorf("Format(90) = %q", got)
	}
}

func TestFormatPanicsOnInvalid(t *testing.T) {
	for _, v := range []float64{-1, math.NaN(), math.Inf(-1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Format(%v) did not panic", v)
				}
			}()
			Format(v)
		}()
	}
}

func TestDurationHelpers(t *testing.T) {
	d, err := ParseDuration("1.5m")
	if err != nil || d != 90*time.Second {
		t.Fatalf("ParseDuration(1.5m) = %v, %v", d, err)
	}
	d, err = ParseDuration("infinity")
	if err != nil || d != time.Duration(math.MaxInt64) {
		t.Fatalf("ParseDuration(infinity) = %v, %v", d, err)
	}
	if got := FormatDuration(d); got != "infinity" {
		t.Errorf("FormatDuration(max) = %q", got)
	}
	if got := FormatDuration(100 * time.Millisecond); got != "0.1s" {
		t.Errorf("FormatDuration(100ms) = %q", got)
	}
	if got := FormatDuration(2 * time.Hour); got != "2h" {
		t.Errorf("FormatDuration(2h) = %q", got)
	}
	if _, err := ParseDuration("bad"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseDuration(bad) err = %v", err)
	}
	if got := ToDuration(1e300); got != time.Duration(math.MaxInt64) {
		t.Errorf("ToDuration(1e300) = %v", got)
	}
	if got := ToDuration(0.0015); got != 1500*time.Microsecond {
		t.Errorf("ToDuration(0.0015) = %v", got)
	}
	if got := FromDuration(1500 * time.Millisecond); got != 1.5 {
		t.Errorf("FromDuration(1.5s) = %v", got)
	}
}

// Every formatted duration parses back to within the precision printed.
func TestFormatParseRoundTrip(t *testing.T) {
	for _, v := range []float64{0, 1e-9, 0.0123, 0.5, 1, 59.99, 61, 3599, 3601, 86399, 1e6, 1e15} {
		s := Format(v)
		got, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(Format(%v) = %q): %v", v, s, err)
		}
		if v != 0 && math.Abs(got-v)/v > 1e-5 {
			t.Errorf("Parse(Format(%v) = %q) = %v", v, s, got)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "30", "1.5m", "2h", "1d", "inf", "infinity", "0.001s", "100ms",
		"-1", "nan", "3x", "", "1e", "1e400", ".5", "5.", "1e-3m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error does not wrap ErrInvalid: %v", s, err)
			}
			return
		}
		if !Valid(v) {
			t.Fatalf("Parse(%q) = %v, not a valid duration", s, v)
		}
		out := Format(v)
		w, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Format(Parse(%q)) = %q): %v", s, out, err)
		}
		if math.IsInf(v, 1) != math.IsInf(w, 1) {
			t.Fatalf("%q -> %v -> %q -> %v", s, v, out, w)
		}
		if !math.IsInf(v, 1) && math.Abs(w-v) > 1e-5*v+1e-300 {
			t.Fatalf("%q -> %v -> %q -> %v: round trip drifted", s, v, out, w)
		}
	})
}
