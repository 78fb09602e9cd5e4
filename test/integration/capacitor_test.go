package integration

import (
	"fmt"
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

// TestCapacitorActive: with --active=2 no more than two of the stream's
// jobs are ever unfinished (each is submitted after an earlier one is
// inactive), and --wait still waits for the last.
func TestCapacitorActive(t *testing.T) {
	e := start(t)
	input := strings.Repeat("--job-name=act --setattr=system.exec.test.run_duration=0.05s true\n", 7)
	r := e.inst.RunInput(t, input, "capacitor", "--active=2", "--wait")
	if r.Code != 0 {
		t.Fatalf("flux capacitor --active=2 --wait: %+v", r)
	}
	ids := strings.Fields(r.Stdout)
	if len(ids) != 7 {
		t.Fatalf("IDs printed: %q", r.Stdout)
	}
	type span struct{ submit, inactive float64 }
	var spans []span
	for _, s := range ids {
		id, err := jobid.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		var sp span
		f := strings.Fields(e.field(id, "{t_submit} {t_inactive} {state}"))
		if len(f) != 3 || f[2] != "INACTIVE" {
			t.Fatalf("job %s after --wait: %q", s, f)
		}
		fmt.Sscan(f[0], &sp.submit)
		fmt.Sscan(f[1], &sp.inactive)
		spans = append(spans, sp)
	}
	// at each job's submission, how many jobs were unfinished
	for i, a := range spans {
		n := 0
		for _, b := range spans {
			if b.submit <= a.submit && b.inactive > a.submit {
				n++
			}
		}
		if n > 2 {
			t.Errorf("job %d submitted with %d unfinished, want at most 2: %+v", i, n, spans)
		}
	}
	if r := e.inst.RunInput(t, "true\n", "capacitor", "--active=-1"); r.Code == 0 || !strings.Contains(r.Stderr, "--active=-1") {
		t.Errorf("--active=-1: %+v", r)
	}
}
