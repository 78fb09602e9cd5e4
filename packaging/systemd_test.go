package packaging

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestDebUnderSystemd installs the .deb in a systemd-nspawn container
// that boots this machine's own systemd on a throw-away overlay of its
// root file system, and takes the package through a site's first hour
// (docs/SITE.md): dpkg -i, systemctl enable --now flux, flux commands on
// the system instance's socket as the flux user, the multi-user set-up
// (User=root and [access]) with root and a guest created in the
// container, reload, stop, dpkg -r and dpkg --purge. Nothing is written
// to the host's root: the container's writes land in a tmpfs the test
// unmounts.
func TestDebUnderSystemd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: boots systemd in a systemd-nspawn container on an overlay of /")
	}
	for _, tool := range []string{"systemd-nspawn", "nsenter", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (systemd-nspawn: apt-get install systemd-container, which scripts/deps.sh does as root)", tool)
		}
	}
	if _, err := os.Stat("/lib/systemd/systemd"); err != nil {
		t.Skipf("no systemd to boot in the container: %v", err)
	}
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.2fs  %s", time.Since(t0).Seconds(), what) }
	host := hostState()
	deb := buildDeb(t, "1.2.3")
	step("built " + filepath.Base(deb))

	// the container's root: / read-only under a tmpfs upper layer
	top := t.TempDir()
	tmp := filepath.Join(top, "t")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", tmp, "tmpfs", 0, "mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs for the container's writes: %v", err)
	}
	t.Cleanup(func() { unmount(t, tmp) })
	merged := filepath.Join(tmp, "merged")
	for _, d := range []string{"upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := fmt.Sprintf("lowerdir=/,upperdir=%s/upper,workdir=%s/work", tmp, tmp)
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("cannot mount an overlay of / (%s): %v", opts, err)
	}
	t.Cleanup(func() { unmount(t, merged) })

	step("overlay of / mounted")
	c := bootContainer(t, merged, filepath.Dir(deb))
	step("container booted")

	// 1. install: the postinst makes the flux user and /var/lib/flux,
	// enables and starts nothing
	// --force-unsafe-io: no fsync of a throw-away tmpfs (it is what
	// takes the time of dpkg -i on an overlay under load)
	c.must("dpkg", "--force-unsafe-io", "-i", "/mnt/fluxgo-deb/"+filepath.Base(deb))
	step("dpkg -i")
	if pw := c.must("getent", "passwd", "flux"); !strings.Contains(pw, ":/var/lib/flux:/usr/sbin/nologin") {
		t.Errorf("the flux user: %q, want home /var/lib/flux and shell /usr/sbin/nologin", pw)
	}
	if st := c.must("stat", "-c", "%a %U %G", "/var/lib/flux"); st != "700 flux flux" {
		t.Errorf("/var/lib/flux: %q, want 700 flux flux", st)
	}
	if out, _ := c.run("systemctl", "is-enabled", "flux"); out != "disabled" {
		t.Errorf("after dpkg -i, systemctl is-enabled flux: %q, want disabled", out)
	}
	if out, _ := c.run("systemctl", "is-active", "flux"); out != "inactive" {
		t.Errorf("after dpkg -i, systemctl is-active flux: %q, want inactive", out)
	}

	// 2. start it as shipped: the broker runs as the flux user
	start := time.Now()
	c.must("systemctl", "enable", "--now", "flux")
	c.waitActive()
	asFlux := []string{"runuser", "-u", "flux", "--", "env", "FLUX_URI=local:///run/flux/local"}
	c.waitFlux(asFlux)
	t.Logf("flux.service active and answering %.2fs after systemctl enable --now", time.Since(start).Seconds())
	if out := c.must("systemctl", "show", "-p", "MainPID", "--value", "flux"); out != "" {
		if user := c.must("ps", "-o", "user=", "-p", out); user != "flux" {
			t.Errorf("the broker (pid %s) runs as %q, want flux", out, user)
		}
	}
	step("flux.service active")
	hostname := c.must("hostname")
	if out := c.must(append(asFlux, "flux", "uptime")...); !strings.Contains(out, "owner flux") {
		t.Errorf("flux uptime as flux: %q, want owner flux", out)
	}
	checkResources(t, c.must(append(asFlux, "flux", "resource", "list")...), hostname)
	if out := c.must(append(asFlux, "flux", "run", "hostname")...); out != hostname {
		t.Errorf("flux run hostname as flux: %q, want %q", out, hostname)
	}
	// with FLUX_URI unset a command finds the system instance itself
	if out := c.must("runuser", "-u", "flux", "--", "env", "-u", "FLUX_URI", "flux", "run", "id", "-un"); out != "flux" {
		t.Errorf("flux run id -un as flux, FLUX_URI unset: %q, want flux", out)
	}
	step("flux uptime, resource list, run as the flux user")
	// guests are refused until [access] allows them, saying so
	asRoot := []string{"env", "FLUX_URI=local:///run/flux/local"}
	if out, err := c.run(append(asRoot, "flux", "uptime")...); err == nil || !strings.Contains(out, "allow-guest-user") {
		t.Errorf("flux uptime as root with the shipped configuration: %v %q, want a refusal naming access.allow-guest-user", err, out)
	}

	// 3. the multi-user instance of SITE.md: the broker as root, guests
	// admitted; a user made in the container runs a job as itself
	c.write("/etc/systemd/system/flux.service.d/override.conf", "[Service]\nUser=root\nGroup=root\n")
	c.write("/etc/flux/system/conf.d/access.toml", "[access]\nallow-guest-user = true\nallow-root-owner = true\n")
	c.must("useradd", "--create-home", "--shell", "/bin/sh", "fluxgo-alice")
	c.must("systemctl", "daemon-reload")
	start = time.Now()
	c.must("systemctl", "restart", "flux")
	c.waitActive()
	c.waitFlux(asRoot)
	t.Logf("restarted as root, answering %.2fs after systemctl restart", time.Since(start).Seconds())
	if out := c.must(append(asRoot, "flux", "uptime")...); !strings.Contains(out, "owner root") {
		t.Errorf("flux uptime as root: %q, want owner root", out)
	}
	if out := c.must(append(asRoot, "flux", "run", "id", "-un")...); out != "root" {
		t.Errorf("flux run id -un as root: %q, want root", out)
	}
	asAlice := []string{"runuser", "-u", "fluxgo-alice", "--", "env", "FLUX_URI=local:///run/flux/local"}
	if out := c.must(append(asAlice, "flux", "run", "id", "-un")...); out != "fluxgo-alice" {
		t.Errorf("flux run id -un as a guest: %q, want fluxgo-alice", out)
	}
	checkResources(t, c.must(append(asAlice, "flux", "resource", "list")...), hostname)
	step("flux uptime, run, resource list as root and as a guest")
	c.must("systemctl", "reload", "flux")
	if out, _ := c.run("systemctl", "is-active", "flux"); out != "active" {
		t.Errorf("after systemctl reload: is-active %q", out)
	}

	// 4. a running job outlives systemctl restart (KillMode=process, the
	// statedir): the same shell process runs it on, the new broker takes
	// it back, and it can be cancelled through it
	id := c.must(append(asAlice, "flux", "submit", "sleep", "600")...)
	c.must(append(asAlice, "flux", "job", "wait-event", "-t", "60", id, "start")...)
	pid := c.must("sh", "-c", "pgrep -u fluxgo-alice -x sleep | head -1")
	start = time.Now()
	c.must("systemctl", "restart", "flux")
	c.waitActive()
	c.waitFlux(asRoot)
	t.Logf("restarted with a job running, answering %.2fs after systemctl restart", time.Since(start).Seconds())
	if _, err := c.run("kill", "-0", pid); err != nil {
		t.Errorf("job %s's task (pid %s) did not outlive systemctl restart", id, pid)
	}
	if out := c.must(append(asAlice, "flux", "jobs", "-n", "-o", "{state}", id)...); out != "RUN" {
		t.Errorf("job %s after systemctl restart: %q, want RUN", id, out)
	}
	c.must(append(asAlice, "flux", "cancel", id)...)
	c.must(append(asAlice, "flux", "job", "wait-event", "-t", "60", id, "clean")...)
	if out := c.must(append(asAlice, "flux", "jobs", "-n", "-o", "{result}", id)...); out != "CANCELED" {
		t.Errorf("job %s cancelled after the restart: %q, want CANCELED", id, out)
	}
	if _, err := c.run("kill", "-0", pid); err == nil {
		t.Errorf("job %s's task (pid %s) runs on after the job was cancelled", id, pid)
	}
	step("a running job outlives systemctl restart")

	// 5. a clean stop with no job running: the broker exits when asked,
	// its idle shells exit (nothing for systemd to kill), /run/flux is
	// kept for the next start
	jstart := c.must("date", "+%Y-%m-%d %H:%M:%S")
	c.must("systemctl", "stop", "flux")
	state := c.must("systemctl", "show", "-p", "ActiveState", "--value", "flux")
	result := c.must("systemctl", "show", "-p", "Result", "--value", "flux")
	if state != "inactive" || result != "success" {
		j, _ := c.run("journalctl", "--no-pager", "-u", "flux", "-n", "30")
		t.Errorf("after systemctl stop: ActiveState=%s Result=%s, want inactive and success\n%s", state, result, j)
	}
	// systemd kills nothing (KillMode=process): the broker's idle
	// shells exit when told
	if j, _ := c.run("journalctl", "--no-pager", "-o", "cat", "-u", "flux", "--since", jstart); strings.Contains(j, "SIGKILL") {
		for _, line := range strings.Split(j, "\n") {
			if strings.Contains(line, "SIGKILL") {
				t.Errorf("on stop: %s", line)
			}
		}
	}
	// idle shells told to exit go on their own (KillMode=process: not
	// killed); give them a moment
	var procs string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		procs, err = c.run("sh", "-c", "cat /sys/fs/cgroup/systemd/system.slice/flux.service/cgroup.procs /sys/fs/cgroup/system.slice/flux.service/cgroup.procs 2>/dev/null; true")
		if err == nil && procs == "" || time.Now().After(deadline) {
			break
		}
	}
	if procs != "" {
		ps, _ := c.run("sh", "-c", "for p in "+strings.Join(strings.Fields(procs), " ")+"; do tr '\\0' ' ' < /proc/$p/cmdline; echo; done")
		t.Errorf("30 s after systemctl stop with no job running, processes left in flux.service's cgroup: %q\n%s", procs, ps)
	}
	if _, err := c.run("test", "-d", "/run/flux"); err != nil {
		t.Errorf("/run/flux is gone after systemctl stop (RuntimeDirectoryPreserve=yes keeps it for the shells of running jobs)")
	}

	step("systemctl stop")
	// 6. dpkg -r: binary and unit gone, service disabled, the edited
	// conffile, the flux user and /var/lib/flux kept
	c.must("dpkg", "--force-unsafe-io", "-r", "flux")
	for _, p := range []string{"/usr/bin/flux", "/usr/lib/systemd/system/flux.service", "/etc/systemd/system/multi-user.target.wants/flux.service"} {
		if _, err := c.run("test", "-e", p); err == nil {
			t.Errorf("after dpkg -r, %s is left", p)
		}
	}
	for _, p := range []string{"/etc/flux/system/conf.d/system.toml", "/var/lib/flux"} {
		if _, err := c.run("test", "-e", p); err != nil {
			t.Errorf("after dpkg -r, %s is gone (a conffile and the state are kept)", p)
		}
	}
	// 6. dpkg --purge: the conffile goes; the user and the state stay,
	// as the postrm says
	c.must("dpkg", "--force-unsafe-io", "--purge", "flux")
	if _, err := c.run("test", "-e", "/etc/flux/system/conf.d/system.toml"); err == nil {
		t.Errorf("after dpkg --purge, system.toml is left")
	}
	if _, err := c.run("dpkg", "-s", "flux"); err == nil {
		t.Errorf("after dpkg --purge, dpkg -s flux still finds the package")
	}
	if _, err := c.run("getent", "passwd", "flux"); err != nil {
		t.Errorf("after dpkg --purge, the flux user is gone (the postrm keeps it)")
	}
	if _, err := c.run("test", "-d", "/var/lib/flux"); err != nil {
		t.Errorf("after dpkg --purge, /var/lib/flux is gone (the postrm keeps it)")
	}

	step("dpkg -r, dpkg --purge")
	c.shutdown()
	step("container powered off")
	if now := hostState(); now != host {
		t.Errorf("the host changed:\nbefore: %s\nafter:  %s", host, now)
	}
}

// buildDeb builds the package with deb/build.sh into a temporary
// directory and returns its path.
func buildDeb(t *testing.T, version string) string {
	t.Helper()
	bin := testinstance.Binary(t)
	out := t.TempDir()
	cmd := exec.Command("./deb/build.sh", bin, out, version)
	// gzip: the same package, built in a few seconds of CPU on a loaded
	// machine (xz takes 15)
	cmd.Env = append(os.Environ(), "DEB_COMPRESS=gzip")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	return strings.TrimSpace(string(b))
}

// hostState describes what the package would change on the host.
func hostState() string {
	var s []string
	for _, p := range []string{"/usr/bin/flux", "/usr/lib/systemd/system/flux.service", "/etc/flux", "/var/lib/flux", "/home/fluxgo-alice"} {
		_, err := os.Lstat(p)
		s = append(s, fmt.Sprintf("%s exists=%v", p, err == nil))
	}
	for _, f := range []string{"/etc/passwd", "/etc/group", "/var/lib/dpkg/status"} {
		b, _ := os.ReadFile(f)
		for _, name := range []string{"flux:", "fluxgo-alice:", "Package: flux\n"} {
			s = append(s, fmt.Sprintf("%s has %q=%v", f, name, bytes.Contains(b, []byte("\n"+name)) || bytes.HasPrefix(b, []byte(name))))
		}
	}
	return strings.Join(s, ", ")
}

func checkResources(t *testing.T, list, hostname string) {
	t.Helper()
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[0] == "free" && f[1] == "1" && f[4] == hostname {
			return
		}
	}
	t.Errorf("flux resource list: no free line of one node %s:\n%s", hostname, list)
}

func unmount(t *testing.T, dir string) {
	t.Helper()
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Errorf("umount %s: %v", dir, err)
		// not busy for long: the container has gone; detach it
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
}

// container is a booted systemd-nspawn container; its commands run in
// its PID 1's namespaces with nsenter.
type container struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	log     *bytes.Buffer
	exited  chan struct{}
	init    int
	stopped bool
}

// bootContainer boots the tree at root with systemd, debDir bound
// read-only at /mnt/fluxgo-deb, and waits until the boot is over.
func bootContainer(t *testing.T, root, debDir string) *container {
	t.Helper()
	c := &container{t: t, name: fmt.Sprintf("fluxgo-deb-%d", os.Getpid()), log: new(bytes.Buffer), exited: make(chan struct{})}
	// --register=no, --keep-unit: the host's PID 1 need not be systemd;
	// basic.target and no timers: none of the host's services (its
	// PostgreSQL, apt's timers) start in the copy
	c.cmd = exec.Command("systemd-nspawn", "--quiet",
		"--directory="+root, "--machine="+c.name, "--boot",
		"--register=no", "--keep-unit", "--private-network",
		"--console=pipe", "--bind-ro="+debDir+":/mnt/fluxgo-deb",
		"systemd.unit=basic.target", "systemd.mask=timers.target")
	c.cmd.Stdout = c.log
	c.cmd.Stderr = c.log
	c.cmd.Stdin = nil
	begin := time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("systemd-nspawn: %v", err)
	}
	go func() {
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.shutdown)

	// the container's init: nspawn's child once it runs systemd
	deadline := time.Now().Add(3 * time.Minute)
	for c.init == 0 {
		c.checkAlive(deadline, "to exec systemd")
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.cmd.Process.Pid, c.cmd.Process.Pid))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				c.init = pid
			}
		}
		if c.init == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for {
		c.checkAlive(deadline, "to finish booting")
		out, _ := c.run("systemctl", "is-system-running", "--wait")
		if out == "running" || out == "degraded" {
			if out == "degraded" {
				failed, _ := c.run("systemctl", "--failed", "--no-legend")
				t.Logf("the container booted degraded:\n%s", failed)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("container %s booted in %.2fs", c.name, time.Since(begin).Seconds())
	return c
}

func (c *container) checkAlive(deadline time.Time, what string) {
	c.t.Helper()
	select {
	case <-c.exited:
		c.t.Fatalf("systemd-nspawn exited (%v) waiting for the container %s:\n%s", c.cmd.ProcessState, what, c.log)
	default:
	}
	if time.Now().After(deadline) {
		c.t.Fatalf("the container took over 3 minutes %s:\n%s", what, c.log)
	}
}

// run runs a command in the container with a clean environment and
// returns its output, trimmed.
func (c *container) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"-t", strconv.Itoa(c.init), "-a", "--", "env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}, args...)
	b, err := exec.CommandContext(ctx, "nsenter", full...).CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%v: timed out after 2 minutes", err)
	}
	return strings.TrimSpace(string(b)), err
}

// must runs a command in the container and fails the test if it fails.
func (c *container) must(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		j, _ := c.run("journalctl", "--no-pager", "-u", "flux", "-n", "20")
		c.t.Fatalf("in the container, %s: %v\n%s\njournalctl -u flux:\n%s", strings.Join(args, " "), err, out, j)
	}
	return out
}

// write writes a file in the container, making its directory.
func (c *container) write(path, text string) {
	c.t.Helper()
	c.must("mkdir", "-p", filepath.Dir(path))
	c.must("sh", "-c", `printf '%s' "$1" > "$2"`, "sh", text, path)
}

// waitActive waits until systemd calls flux.service active, failing at
// once if it fails.
func (c *container) waitActive() {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _ := c.run("systemctl", "is-active", "flux")
		switch {
		case out == "active":
			return
		case out == "failed" || time.Now().After(deadline):
			j, _ := c.run("journalctl", "--no-pager", "-u", "flux", "-n", "30")
			c.t.Fatalf("flux.service is %q:\n%s", out, j)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFlux waits until flux uptime, run with the prefix, answers: the
// broker is up once its socket takes requests.
func (c *container) waitFlux(prefix []string) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := c.run(append(prefix, "flux", "uptime")...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			j, _ := c.run("journalctl", "--no-pager", "-u", "flux", "-n", "30")
			c.t.Fatalf("flux uptime never answered: %v %s\n%s", err, out, j)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shutdown powers the container off (nspawn passes SIGTERM on to its
// systemd as a poweroff request) and waits for nspawn to exit, killing
// it after three minutes; then removes what nspawn leaves in the host's
// /run.
func (c *container) shutdown() {
	if c.stopped {
		return
	}
	c.stopped = true
	begin := time.Now()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		c.t.Logf("container %s powered off in %.2fs", c.name, time.Since(begin).Seconds())
	case <-time.After(3 * time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.exited
		c.t.Errorf("container %s did not power off in 3 minutes: killed nspawn\n%s", c.name, c.log)
	}
	_ = os.Remove("/run/systemd/nspawn/propagate/" + c.name)
}
