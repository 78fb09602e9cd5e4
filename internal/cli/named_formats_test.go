package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// configDirs points the XDG variables at fresh system and user config
// directories and returns their flux subdirectories.
func configDirs(t *testing.T) (sys, user string) {
	t.Helper()
	root := t.TempDir()
	sys, user = filepath.Join(root, "sys", "flux"), filepath.Join(root, "user", "flux")
	for _, d := range []string{sys, user} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CONFIG_DIRS", filepath.Dir(sys))
	t.Setenv("XDG_CONFIG_HOME", filepath.Dir(user))
	return sys, user
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNamedFormatsConfig: formats from the system and user config files
// of every supported syntax, the user's winning; names resolve, format
// strings pass through, the env variable picks the default.
func TestNamedFormatsConfig(t *testing.T) {
	sys, user := configDirs(t)
	writeFile(t, filepath.Join(sys, "flux-jobs.toml"), "[formats.site]\nformat = \"{id} site\"\n[formats.both]\nformat = \"{id} sys\"\n")
	writeFile(t, filepath.Join(user, "flux-jobs.json"), `{"formats": {"both": {"format": "{id} json", "description": "d"}}}`)
	writeFile(t, filepath.Join(user, "flux-jobs.yaml"), "formats:\n  both:\n    format: \"{id} yaml\"\n")
	for arg, want := range map[string]string{
		"site":        "{id} site",
		"both":        "{id} yaml", // user over system, .yaml after .json
		"{id} {name}": "{id} {name}",
		"long":        jobsFormats[2].format,
	} {
		got, err := jobsFormatSet.resolve(arg)
		if err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
	if _, err := jobsFormatSet.resolve("unknown"); err == nil || !strings.Contains(err.Error(), `no format named "unknown"`) {
		t.Errorf("an unknown name: %v", err)
	}
	t.Setenv("FLUX_JOBS_FORMAT_DEFAULT", "site")
	if got, _ := jobsFormatSet.resolve("default"); got != "{id} site" {
		t.Errorf("FLUX_JOBS_FORMAT_DEFAULT=site: default is %q", got)
	}
	var help strings.Builder
	if err := jobsFormatSet.printHelp(&help); err != nil || !strings.Contains(help.String(), "  site         {id} site\n") {
		t.Errorf("help: %v\n%s", err, help.String())
	}
}

// TestNamedFormatsGetConfig: get-config prints a snippet that, renamed
// and saved, defines the same format.
func TestNamedFormatsGetConfig(t *testing.T) {
	_, user := configDirs(t)
	var b strings.Builder
	if err := resourceFormats["status"].getConfig(&b, "long"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "[status.formats.long]\ndescription = ") {
		t.Fatalf("get-config:\n%s", b.String())
	}
	writeFile(t, filepath.Join(user, "flux-resource.toml"), strings.Replace(b.String(), ".long]", ".copy]", 1))
	got, err := resourceFormat("status", "copy")
	if want, _ := resourceFormat("status", "long"); err != nil || got != want {
		t.Errorf("copy of long: %q, %v; want %q", got, err, want)
	}
	if _, err := resourceFormat("list", "copy"); err == nil {
		t.Errorf("a status format leaked into list: %q", got)
	}
	if err := resourceFormats["status"].getConfig(&b, "nope"); err == nil || !strings.Contains(err.Error(), `no format named "nope"`) {
		t.Errorf("unknown name: %v", err)
	}
}

// TestNamedFormatsConfigErrors: a bad config file is an error naming the
// file and what is wrong, never silently skipped.
func TestNamedFormatsConfigErrors(t *testing.T) {
	for text, want := range map[string]string{
		"[formats.default]\nformat = \"{id}\"\n":      `format "default": a built-in format cannot be redefined`,
		"formats = 3\n":                               "formats must be a table of named formats",
		"[formats.x]\nfmt = \"{id}\"\n":               "formats.x: format is required",
		"[formats.x]\nformat = \"{id}\"\nextra = 1\n": `unknown key "extra"`,
		"[formats.x\n":                                "flux-jobs.toml: toml:",
	} {
		_, user := configDirs(t)
		writeFile(t, filepath.Join(user, "flux-jobs.toml"), text)
		_, err := jobsFormatSet.resolve("x")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
}

// TestPgrepNeedsExpression: flux pgrep and pkill without an expression
// are a command line error, exit code 2 (flux-pgrep(1)); -o help needs
// none.
func TestPgrepNeedsExpression(t *testing.T) {
	for _, args := range [][]string{{"pgrep"}, {"pkill"}} {
		var out strings.Builder
		if code := Main(args, nil, &out, &out); code != 2 || !strings.Contains(out.String(), "EXPRESSION is required") {
			t.Errorf("flux %s: exit %d, %q", args[0], code, out.String())
		}
	}
	var out strings.Builder
	if code := Main([]string{"pgrep", "-o", "help"}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "Configured flux-pgrep output formats:") {
		t.Errorf("flux pgrep -o help: exit %d, %q", code, out.String())
	}
}
