package integration

import (
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestCapacitor: one job per input line, each with its own options, IDs
// printed in input order; a bad line is reported by number and skipped
// while the others are submitted; --wait exits with the largest exit
// code.
func TestCapacitor(t *testing.T) {
	e := start(t)
	input := strings.Join([]string{
		"-n 1 --job-name=one true",
		"# a comment, then a blank line",
		"",
		"-N 2 -n 2 --job-name=two hostname",
		"--bogus-option x",
		"-n 1 --urgency=hold --job-name=held true",
		`--job-name=quoted sh -c "exit 0"`,
	}, "\n") + "\n"
	r := e.inst.RunInput(t, input, "capacitor")
	if r.Code != 1 || !strings.Contains(r.Stderr, "line 5: unknown flag: --bogus-option") {
		t.Fatalf("flux capacitor with a bad line: %+v", r)
	}
	lines := strings.Fields(r.Stdout)
	if len(lines) != 4 {
		t.Fatalf("IDs printed: %q", r.Stdout)
	}
	for i, name := range []string{"one", "two", "held", "quoted"} {
		id, err := jobid.Parse(lines[i])
		if err != nil {
			t.Fatalf("line %d of the output %q: %v", i, lines[i], err)
		}
		if got := e.field(id, "{name} {ntasks}"); !strings.HasPrefix(got, name+" ") {
			t.Errorf("job %d: %q, want name %s", i, got, name)
		}
	}
	held, _ := jobid.Parse(lines[2])
	if got := e.field(held, "{urgency}"); got != "0" {
		t.Errorf("held job urgency %q", got)
	}
	e.must("cancel", held.String())

	r = e.inst.RunInput(t, "-n 1 true\n-n 1 sh -c 'exit 3'\n", "capacitor", "--wait", "--quiet")
	if r.Code != 3 || r.Stdout != "" {
		t.Fatalf("flux capacitor --wait: %+v", r)
	}
	if r := e.inst.RunInput(t, "-n 2 hostname\n", "capacitor", "--dry-run"); r.Code != 0 || !strings.Contains(r.Stdout, `"count":2`) {
		t.Fatalf("flux capacitor --dry-run: %+v", r)
	}
}

// TestMini: flux-core's deprecated flux mini spelling still submits.
func TestMini(t *testing.T) {
	e := start(t)
	r := e.flux("mini", "run", "-n1", "echo", "hello")
	if r.Code != 0 || r.Stdout != "hello\n" || !strings.Contains(r.Stderr, "deprecated") {
		t.Fatalf("flux mini run: %+v", r)
	}
}
