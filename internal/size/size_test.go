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
