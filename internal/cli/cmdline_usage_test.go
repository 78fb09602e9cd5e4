package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestUsageOnBadCommandLine: an unknown subcommand or option, or a wrong
// number of arguments, fails with the error and the command's usage
// line (flux-core's tests grep for "usage:").
func TestUsageOnBadCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "wrongsubcmd"}, "Usage: flux queue"},
		{[]string{"queue", "drain", "xyz"}, "Usage: flux queue drain"},
		{[]string{"jobs", "--no-such-option"}, "Usage: flux jobs"},
	} {
		var out, errb bytes.Buffer
		code := Main(tc.args, strings.NewReader(""), &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("flux %s: exit %d, stderr %q (want %q)", strings.Join(tc.args, " "), code, errb.String(), tc.want)
		}
	}
	// an error that is not about the command line has no usage line
	var out, errb bytes.Buffer
	if code := Main([]string{"jobspec", "validate", "/no/such/file"}, strings.NewReader(""), &out, &errb); code == 0 || strings.Contains(errb.String(), "Usage:") {
		t.Errorf("a missing file: exit %d, stderr %q", code, errb.String())
	}
}

// TestOptionAbbreviations: commands take an unambiguous prefix of a long
// option (argparse and getopt_long both do); an ambiguous one is
// still an error, and what follows the job command is not touched.
func TestOptionAbbreviations(t *testing.T) {
	root := newRoot(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	for _, tc := range []struct{ in, want string }{
		{"resource list --state=up", "resource list --states=up"},
		{"submit --time 5s app --time", "submit --time-limit 5s app --time"},
		{"jobs --stat", "jobs --stat"},                 // --stats or --stats-only: left for the parser to refuse
		{"kvs get --wait a", "kvs get --waitcreate a"}, // getopt_long abbreviates too
		{"job attach --show-event f1", "job attach --show-events f1"},
		{"submit -- app --time", "submit -- app --time"}, // after --
	} {
		got := strings.Join(expandAbbrevs(root, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}
