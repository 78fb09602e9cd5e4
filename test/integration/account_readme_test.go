package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// readmeAdminBlock is the README's "Accounting: an admin's first ten
// minutes" commands, one a line, without comments.
func readmeAdminBlock(t *testing.T) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Skipf("no README.md beside the tests: %v", err)
	}
	_, rest, ok := strings.Cut(string(text), "## Accounting: an admin's first ten minutes")
	if !ok {
		t.Fatal("README.md has no section \"Accounting: an admin's first ten minutes\"")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md's accounting section has no sh block")
	}
	comment := regexp.MustCompile(`\s+#\s.*$`)
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(comment.ReplaceAllString(l, ""))
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestAccountREADME: every command of the README's admin's first ten
// minutes works as printed on a fresh root instance started as its
// first line says (a statedir, a configuration with an [archive]
// table), with alice a real user who runs a job after she is added;
// and that flux account update-usage and flux jobs -a -A then show her
// job in the report and the list (the block as printed shows neither).
func TestAccountREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	lines := readmeAdminBlock(t)
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "flux start ") ||
		!strings.Contains(lines[0], "statedir=") || !strings.Contains(lines[0], "--config-path=") {
		t.Fatalf("the README's block does not begin with flux start -Sstatedir=... --config-path=...: %q", lines)
	}
	aliceUID := testUser(t, "alice")
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "archive.toml"), []byte("[archive]\nperiod = \"0.5s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1,
		Args: []string{"--config-path", conf, "-S", "statedir=" + t.TempDir()}})}
	if !canRunAsGuest(e) {
		t.Skip("the flux binary is not reachable by other users")
	}
	path := filepath.Dir(e.inst.Bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	ran := false
	for _, line := range lines[1:] {
		if !ran && strings.HasPrefix(line, "flux usage") {
			// the README's comment: alice's jobs go to physics and climate
			id := jobid.MustParse(e.mustAs(aliceUID, "submit", "-n1", "sleep", "0.5"))
			e.waitEvent(id, "clean")
			if got := e.field(id, "{bank} {project}"); got != "physics climate" {
				t.Errorf("alice's job is charged to %q, want physics climate", got)
			}
			e.refusedAs(aliceUID, "does not belong to it", "submit", "-B", "root", "true")
			ran = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // hang guard
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI, "PATH="+path)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("the README's %q: %v\n%s", line, err, out.String())
			continue
		}
		t.Logf("$ %s\n%s", line, out.String())
		switch {
		case strings.Contains(line, "view-bank root --tree --users"):
			if !strings.Contains(out.String(), "physics") || !strings.Contains(out.String(), "alice") {
				t.Errorf("%s shows no physics and alice:\n%s", line, out.String())
			}
		case strings.Contains(line, "view-user alice"):
			if !strings.Contains(out.String(), "physics") {
				t.Errorf("%s shows no bank physics:\n%s", line, out.String())
			}
		case strings.HasPrefix(line, "flux usage"):
			if !strings.Contains(out.String(), "alice") {
				t.Errorf("%s shows no alice:\n%s", line, out.String())
			}
		}
	}
	if !ran {
		t.Error("the README's block has no flux usage line to report alice's job")
	}
	// what the block shows more of with a pass run now (the usage
	// history is written by the fair-share pass, every minute) and with
	// flux jobs -a -A (alice's job is inactive, and another user's)
	e.must("account", "update-usage")
	if out := e.must("account", "view-usage-report", "-s", "-30d", "-t", "hour"); !strings.Contains(out, "physics:alice") {
		t.Errorf("view-usage-report after update-usage:\n%s", out)
	}
	if out := e.must("jobs", "-a", "-A", "-o", "{id} {username} {bank} {fairshare:.4f} {priority}"); !strings.Contains(out, "alice physics") {
		t.Errorf("flux jobs -a -A:\n%s", out)
	}
}
