package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJobspecValidateCommand(t *testing.T) {
	dir := "../../testdata/jobspec"
	valid, _ := filepath.Glob(filepath.Join(dir, "valid", "*.yaml"))
	invalid, _ := filepath.Glob(filepath.Join(dir, "invalid", "*.yaml"))
	if len(valid) == 0 || len(invalid) == 0 {
		t.Fatal("no conformance files")
	}

	out, errOut, code := runJobCLI(t, "", append([]string{"jobspec", "validate"}, valid...)...)
	if code != 0 || out != "" || errOut != "" {
		t.Errorf("valid files: code %d, stdout %q, stderr %q", code, out, errOut)
	}

	_, errOut, code = runJobCLI(t, "", append([]string{"jobspec", "validate"}, invalid...)...)
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if code != 1 || len(lines) != len(invalid) {
		t.Fatalf("invalid files: code %d, %d stderr lines for %d files:\n%s", code, len(lines), len(invalid), errOut)
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, invalid[i]+": ") {
			t.Errorf("line %q does not start with %q", line, invalid[i]+": ")
		}
	}

	// One bad file among good ones, and the V1 rules.
	args := []string{"jobspec", "validate", "--v1", valid[0], filepath.Join(dir, "valid", "basic_v1.yaml")}
	_, errOut, code = runJobCLI(t, "", args...)
	if code != 1 || !strings.Contains(errOut, "version: must be 1 for a version 1 jobspec") ||
		strings.Contains(errOut, "basic_v1") {
		t.Errorf("--v1: code %d stderr %q", code, errOut)
	}
}

func TestJobspecValidateStdin(t *testing.T) {
	doc, err := os.ReadFile("../../testdata/rfc-examples/spec_25/example1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runJobCLI(t, string(doc), "jobspec", "validate", "--v1", "-"); code != 0 {
		t.Errorf("stdin: code %d stderr %q", code, errOut)
	}
	_, errOut, code := runJobCLI(t, "version: 1\n", "jobspec", "validate", "-", "/nonexistent.yaml")
	want := "-: resources: required key is missing\n/nonexistent.yaml: open /nonexistent.yaml: no such file or directory\n"
	if code != 1 || errOut != want {
		t.Errorf("code %d stderr %q, want %q", code, errOut, want)
	}
	if _, _, code := runJobCLI(t, "", "jobspec", "validate"); code == 0 {
		t.Error("validate without files succeeded")
	}
}

func TestSubmitCommand(t *testing.T) {
	t.Setenv("FLUX_URI", "")
	os.Unsetenv("FLUX_URI")
	out, errOut, code := runJobCLI(t, "", "submit", "--dry-run", "-n2", "hostname", "-n", "5")
	if code != 0 || errOut != "" {
		t.Fatalf("dry run: code %d stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, `{"resources":[{"type":"slot","count":2,`) ||
		!strings.Contains(out, `"command":["hostname","-n","5"]`) || !strings.HasSuffix(out, "}\n") {
		t.Errorf("dry run output %q", out)
	}
	out, _, code = runJobCLI(t, "", "submit", "--dry-run", "--cc=0-2", "true")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("--cc dry run: code %d, %d lines", code, strings.Count(out, "\n"))
	}
	_, errOut, code = runJobCLI(t, "", "submit", "hostname")
	if code != 1 || errOut != "flux-submit: ERROR: cannot submit: no Flux instance (FLUX_URI not set, and no system instance at "+systemSocket+")\n" {
		t.Errorf("submit: code %d stderr %q", code, errOut)
	}
	_, errOut, code = runJobCLI(t, "", "run", "hostname")
	if code != 1 || errOut != "flux-run: ERROR: cannot submit: no Flux instance (FLUX_URI not set, and no system instance at "+systemSocket+")\n" {
		t.Errorf("run: code %d stderr %q", code, errOut)
	}
	_, errOut, code = runJobCLI(t, "", "submit", "--dry-run", "-t", "3x", "hostname")
	if code != 1 || !strings.HasPrefix(errOut, `flux-submit: ERROR: --time-limit: invalid Flux standard duration "3x"`) {
		t.Errorf("bad option: code %d stderr %q", code, errOut)
	}
	_, errOut, code = runJobCLI(t, "", "run", "--dry-run")
	if code != 1 || errOut != "flux-run: ERROR: job command and arguments are missing\n" {
		t.Errorf("no command: code %d stderr %q", code, errOut)
	}
	// flux run has no --cc.
	if _, _, code = runJobCLI(t, "", "run", "--cc=1", "--dry-run", "true"); code == 0 {
		t.Error("flux run accepted --cc")
	}
}
