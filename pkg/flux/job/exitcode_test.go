package job

import "testing"

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		status int
		code   int
		text   string
	}{
		{0, 0, ""},
		{1 << 8, 1, "task(s) exited with exit code 1"},
		{(128 + 15) << 8, 143, "task(s) Terminated"},
		{(128 + 11) << 8, 139, "task(s) Segmentation fault"},
		{9, 137, "job shell Killed"},
		{15, 143, "job shell Terminated"},
		{-1, -1, "unexpected wait(2) status -1"},
	} {
		code, text := ExitCode(tt.status)
		if code != tt.code || text != tt.text {
			t.Errorf("ExitCode(%d) = %d, %q; want %d, %q", tt.status, code, text, tt.code, tt.text)
		}
	}
	if got := SignalText(10); got != "User defined signal 1" {
		t.Errorf("SignalText(10) = %q", got)
	}
}
