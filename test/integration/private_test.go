package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestPrivateModeReload: flux-core's [access] private-mode, turned on
// and off by flux config reload: with it a guest lists only their own
// jobs and a user of [access.roles.admin] (flux-core's admin role, the
// operator role here) still lists everyone's; without it the guest
// lists every job again.
func TestPrivateModeReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	adminUID := testUser(t, "fluxpriv-admin")
	conf := t.TempDir()
	write := func(toml string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(conf, "access.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := "[access]\nallow-guest-user = true\nroles.admin.users = [\"fluxpriv-admin\"]\n"
	write(base)
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Args: []string{"--config-path", conf}})}
	if !canRunAsGuest(e) {
		t.Skip("the flux binary is not reachable by other users")
	}
	owners := jobid.MustParse(e.must("submit", "true"))
	e.waitEvent(owners, "clean")
	guests := jobid.MustParse(e.mustAs(guestUID, "submit", "true"))
	e.waitEvent(guests, "clean")
	sees := func(uid uint32, id jobid.ID) bool {
		t.Helper()
		return strings.Contains(e.mustAs(uid, "jobs", "-a", "-A", "-n", "-o", "{id}"), id.String())
	}
	if !sees(guestUID, owners) {
		t.Errorf("private mode off: the guest does not list the owner's job")
	}
	write(base + "private-mode = true\n")
	e.must("config", "reload")
	if sees(guestUID, owners) {
		t.Errorf("private mode on after flux config reload: the guest lists the owner's job")
	}
	if !sees(guestUID, guests) {
		t.Errorf("private mode on: the guest does not list their own job")
	}
	if !sees(adminUID, owners) || !sees(adminUID, guests) {
		t.Errorf("private mode on: a user of access.roles.admin does not list every job")
	}
	write(base)
	e.must("config", "reload")
	if !sees(guestUID, owners) {
		t.Errorf("private mode off again: the guest does not list the owner's job")
	}
	// a wrong value is refused by the reload, naming the key
	write(base + "private-mode = \"yes\"\n")
	if r := e.flux("config", "reload"); r.Code == 0 || !strings.Contains(r.Stderr, "access.private-mode") {
		t.Errorf("private-mode = \"yes\": flux config reload exit %d, stderr %q; want a refusal naming access.private-mode", r.Code, r.Stderr)
	}
}
