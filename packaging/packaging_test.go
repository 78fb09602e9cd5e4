// Package packaging holds the files of fluxgo's system-instance package
// (the systemd unit, the shipped configuration, the .deb's scripts); its
// tests build the .deb and check what it holds, installing nothing.
package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

func TestDebContents(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not found")
	}
	bin := testinstance.Binary(t)
	out := t.TempDir()
	cmd := exec.Command("./deb/build.sh", bin, out, "1.2.3")
	// gzip: what the package holds does not depend on it, and xz takes
	// minutes of a loaded machine (make deb keeps xz)
	cmd.Env = append(os.Environ(), "DEB_COMPRESS=gzip")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	deb := strings.TrimSpace(string(b))
	if filepath.Dir(deb) != out || !strings.HasPrefix(filepath.Base(deb), "flux_1.2.3_") {
		t.Fatalf("build.sh printed %q, want a flux_1.2.3_ARCH.deb in %s", deb, out)
	}

	b, err = exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v", err)
	}
	list := string(b)
	for _, want := range []string{
		"root/root", // owned by root whoever builds it
		"./usr/bin/flux",
		"./usr/lib/systemd/system/flux.service",
		"./etc/flux/system/conf.d/system.toml",
		"./usr/lib/fluxgo/python/flux/__init__.py",
		"./usr/share/doc/flux/SITE.md",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("dpkg-deb -c lacks %s:\n%s", want, list)
		}
	}
	if strings.Contains(list, "__pycache__") {
		t.Errorf("the package holds __pycache__:\n%s", list)
	}

	b, err = exec.Command("dpkg-deb", "-I", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -I: %v", err)
	}
	info := string(b)
	for _, want := range []string{"Package: flux", "Version: 1.2.3", "postinst", "prerm", "postrm", "conffiles"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb -I lacks %q:\n%s", want, info)
		}
	}
	b, err = exec.Command("dpkg-deb", "-f", deb, "Architecture").Output()
	if err != nil || strings.TrimSpace(string(b)) == "" {
		t.Errorf("dpkg-deb -f Architecture: %q, %v", b, err)
	}

	// the maintainer scripts inside the package, as dpkg would run them
	ctl := t.TempDir()
	if b, err := exec.Command("dpkg-deb", "-e", deb, ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v\n%s", err, b)
	}
	post, err := os.ReadFile(filepath.Join(ctl, "postinst"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"useradd --system", "/var/lib/flux", "/etc/flux/system/conf.d"} {
		if !strings.Contains(string(post), want) {
			t.Errorf("postinst lacks %q", want)
		}
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		if b, err := exec.Command("sh", "-n", filepath.Join(ctl, s)).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", s, err, b)
		}
	}
	conff, _ := os.ReadFile(filepath.Join(ctl, "conffiles"))
	if strings.TrimSpace(string(conff)) != "/etc/flux/system/conf.d/system.toml" {
		t.Errorf("conffiles: %q", conff)
	}
}

// unitExecStart returns the unit's ExecStart command, its continuation
// lines joined, split into words.
func unitExecStart(t *testing.T, unit string) []string {
	t.Helper()
	joined := strings.ReplaceAll(unit, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return strings.Fields(v)
		}
	}
	t.Fatal("flux.service has no ExecStart")
	return nil
}

// TestUnitBrokerStarts runs the unit's ExecStart, with its paths moved
// into a temporary directory and an initial program, so that every
// option it gives the broker is one the broker accepts, with the shipped
// configuration.
func TestUnitBrokerStarts(t *testing.T) {
	bin := testinstance.Binary(t)
	unit, err := os.ReadFile("flux.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"User=flux", "RuntimeDirectory=flux", "StateDirectory=flux", "Restart=always", "KillMode=process", "RuntimeDirectoryPreserve=yes", "SuccessExitStatus=143", "ExecReload=/usr/bin/flux config reload"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("flux.service lacks %s", want)
		}
	}
	args := unitExecStart(t, string(unit))
	if args[0] != "/usr/bin/flux" || args[1] != "broker" {
		t.Fatalf("ExecStart %q: want /usr/bin/flux broker ...", args)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile("conf.d/system.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "system.toml"), shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	moved := map[string]string{
		"/etc/flux/system/conf.d": conf,
		"/run/flux":               filepath.Join(dir, "run"),
		"/var/lib/flux":           filepath.Join(dir, "state"),
	}
	var brokerArgs []string
	for _, a := range args[1:] {
		for from, to := range moved {
			if strings.HasSuffix(a, "="+from) {
				a = strings.TrimSuffix(a, from) + to
			}
		}
		brokerArgs = append(brokerArgs, a)
	}
	brokerArgs = append(brokerArgs, bin, "getattr", "statedir")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, brokerArgs...)
	cmd.Env = append(os.Environ(), "FLUX_URI=")
	b, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("flux %s: %v\n%s", strings.Join(brokerArgs, " "), err, stderr)
	}
	if got := strings.TrimSpace(string(b)); got != moved["/var/lib/flux"] {
		t.Errorf("statedir %q, want %q", got, moved["/var/lib/flux"])
	}

	// systemd's own check of the unit, where systemd-analyze exists (it
	// wants the ExecStart binary to exist: point it at the one under test)
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		u := filepath.Join(dir, "flux.service")
		if err := os.WriteFile(u, []byte(strings.ReplaceAll(string(unit), "/usr/bin/flux", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("systemd-analyze", "verify", u).CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify: %v\n%s", err, b)
		}
	}
}
