package size

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in   any
		want int64
		bad  bool
	}{
		{"100M", 100 << 20, false},
		{"100m", 100 << 20, false},
		{"1.5G", 3 << 29, false},
		{"512KiB", 512 << 10, false},
		{"2gb", 2 << 30, false},
		{"4096", 4096, false},
		{float64(1 << 20), 1 << 20, false},
		{"", 0, true},
		{"M", 0, true},
		{"10X", 0, true},
		{"-5M", 0, true},
		{float64(0), 0, true},
		{float64(1.5), 0, true},
		{true, 0, true},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("Parse(%v) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%v) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, b := range []int64{100 << 20, 3 << 29, 4096, 1 << 40} {
		s := Format(b)
		if back, err := Parse(s); err != nil || back != b {
			t.Errorf("Format(%d) = %q parses back as %d, %v", b, s, back, err)
		}
	}
}

func TestBounded(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "64k": 64 << 10, "1.5M": 3 << 19, "2G": 2 << 30} {
		if got, err := Bounded(s, 0, 1<<31); err != nil || got != want {
			t.Errorf("Bounded(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"3G", "-1", "x", "1Q"} {
		if _, err := Bounded(s, 0, 2<<30); err == nil {
			t.Errorf("Bounded(%q) accepted", s)
		}
	}
}
