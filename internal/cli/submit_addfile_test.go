package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmitAddFileAndFlags: --add-file's forms as flux-core takes them
// (PATH, NAME=PATH, NAME=TEXT with newlines or \n, NAME:PERMS=...), and
// --flags as a comma-separated list.
func TestSubmitAddFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.txt")
	os.WriteFile(path, []byte("from file\n"), 0o640)
	files := func(args ...string) map[string]map[string]any {
		t.Helper()
		out, errs, code := runJobCLI(t, "", append(append([]string{"submit", "--dry-run"}, args...), "true")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var js struct {
			Attributes struct {
				System struct {
					Files map[string]map[string]any `json:"files"`
				} `json:"system"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal([]byte(out), &js); err != nil {
			t.Fatal(err)
		}
		return js.Attributes.System.Files
	}
	for _, tc := range []struct {
		arg, name string
		mode      float64
		data      string
	}{
		{path, "in.txt", 0o640, "from file\n"},
		{"other=" + path, "other", 0o640, "from file\n"},
		{`note=this is a test\n`, "note", 0o600, "this is a test\n"},
		{"script:0700=#!/bin/sh\\ntrue\\n", "script", 0o700, "#!/bin/sh\ntrue\n"},
		{`add-file:test=text\n`, "add-file:test", 0o600, "text\n"}, // not octal: part of the name
	} {
		f := files("--add-file=" + tc.arg)[tc.name]
		mode, _ := f["mode"].(float64)
		if f == nil || int(mode)&0o7777 != int(tc.mode) || f["data"] != tc.data {
			t.Errorf("--add-file=%s: %v (want %s mode %o)", tc.arg, f, tc.name, int(tc.mode))
		}
	}
	if _, errs, code := runJobCLI(t, "", "submit", "--dry-run", `--add-file=a\nb`, "true"); code == 0 || !strings.Contains(errs, "file name missing") {
		t.Errorf("text without a name: exit %d, %q", code, errs)
	}
	if _, errs, code := runJobCLI(t, "", "submit", "--dry-run", "--flags", "debug,waitable", "true"); code != 0 {
		t.Errorf("--flags debug,waitable: exit %d, %q", code, errs)
	}
	if _, errs, code := runJobCLI(t, "", "submit", "--dry-run", "--flags", "debug,bogus", "true"); code == 0 || !strings.Contains(errs, `unknown flag "bogus"`) {
		t.Errorf("--flags debug,bogus: exit %d, %q", code, errs)
	}
}
