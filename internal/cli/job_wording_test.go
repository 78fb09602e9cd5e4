package cli

import "testing"

// TestJobControlWording: flux-core's texts for flux job kill, killall and
// raiseall arguments (its tests compare them exactly).
func TestJobControlWording(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"FOO", "error parsing --states: FOO is unknown"},
		{"", "no states specified"},
		{"inactive", "Exceptions cannot be raised on inactive jobs"},
	} {
		if _, err := parseStatesMask("--states", tc.in); err == nil || err.Error() != tc.want {
			t.Errorf("states %q: %v, want %q", tc.in, err, tc.want)
		}
	}
	for _, s := range []string{"SIGFAKE", "0", "-3"} {
		if _, err := signalNumber(s); err == nil || err.Error() != "Invalid signal "+s {
			t.Errorf("signal %q: %v", s, err)
		}
	}
	if got := signalDescription(15); got != "Terminated" {
		t.Errorf("signal 15: %q", got)
	}
	_, errs, code := runJobCLI(t, "", "job", "kill", "-s", "SIGFAKE", "1")
	if code != 1 || errs != "flux-job: kill: Invalid signal SIGFAKE\n" {
		t.Errorf("kill -s SIGFAKE: %d %q", code, errs)
	}
	out, _, code := runJobCLI(t, "", "job", "namespace", "1", "ƒ2")
	if code != 0 || out != "job-1\njob-1\n" {
		t.Errorf("namespace: %d %q", code, out)
	}
}
