package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestConfigGetEffective: what an admin sees of a running instance is
// its configuration as merged: every file of its --config-path, its
// --conf values and changes since, the same from every broker; saved as
// JSON it reads back with --config-path.
func TestConfigGetEffective(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"access.toml": "[access]\nallow-guest-user = true\n",
		"policy.toml": "[policy.limits]\nduration = \"1h\"\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2,
		Args: []string{"--config-path", dir, "--conf=job-manager.inactive-num-limit=100"}})}

	want := `{"access":{"allow-guest-user":true},"job-manager":{"inactive-num-limit":100},"policy":{"limits":{"duration":"1h"}}}`
	if got := e.must("config", "get"); got != want {
		t.Errorf("config get:\n got %s\nwant %s", got, want)
	}
	if got := e.must("exec", "-r", "1", e.inst.Bin, "config", "get"); got != want {
		t.Errorf("config get on rank 1:\n got %s\nwant %s", got, want)
	}
	// the files alone lack --conf's value
	if got := e.must("config", "get", "-c", dir); got != `{"access":{"allow-guest-user":true},"policy":{"limits":{"duration":"1h"}}}` {
		t.Errorf("config get -c DIR: %s", got)
	}

	saved := filepath.Join(t.TempDir(), "effective.json")
	if err := os.WriteFile(saved, []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.must("config", "get", "-c", saved, "job-manager.inactive-num-limit"); got != "100" {
		t.Errorf("config get -c saved.json: %s", got)
	}
	if got := e.must("config", "get", "-c", saved, "-t", "fsd-integer", "policy.limits.duration"); got != "3600" {
		t.Errorf("config get -c saved.json -t fsd-integer: %s", got)
	}
	e.fail("bad.json: JSON", "config", "get", "-c", configTestFile(t, "bad.json", "{nope"))
	if _, err := os.Stat("/etc/flux/system/conf.d"); os.IsNotExist(err) {
		e.fail("/etc/flux/system/conf.d", "config", "get", "-c", "system")
	}
}

func configTestFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
