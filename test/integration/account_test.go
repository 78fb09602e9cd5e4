package integration

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// testUser makes a real user on this host for the test (useradd), or
// skips the test where it cannot (not root, no useradd); the user is
// removed when the test ends. It returns the uid.
func testUser(t *testing.T, name string) uint32 {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to add users")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("needs useradd")
	}
	if _, err := user.Lookup(name); err != nil {
		if out, err := exec.Command("useradd", "-M", "-N", "-s", "/bin/false", name).CombinedOutput(); err != nil {
			t.Skipf("useradd %s: %v: %s", name, err, out)
		}
		t.Cleanup(func() { exec.Command("userdel", name).Run() })
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(uid)
}

// TestAccount: the instance owner sets up banks, users and projects with
// flux account; real users' jobs are then charged to their default bank
// and project, a foreign bank or project is refused, the database's
// limits apply over the configuration's, and users see only their own
// associations (issue 25).
func TestAccount(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	accountBody(t, "")
}

// accountBody is TestAccount's body; dbconf is the [accounting] lines
// that name a PostgreSQL database ("": the SQLite file in the statedir).
func accountBody(t *testing.T, dbconf string) {
	aliceUID := testUser(t, "fluxacct-alice")
	bobUID := testUser(t, "fluxacct-bob")
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "acct.toml"), []byte("[accounting]\nmax-running-jobs = 5\n"+dbconf), 0o644); err != nil {
		t.Fatal(err)
	}
	statedir := t.TempDir()
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1,
		Args: []string{"--config-path", conf, "-S", "statedir=" + statedir}})}
	if !canRunAsGuest(e) {
		t.Skip("the flux binary is not reachable by other users")
	}

	// the admin's first minutes: banks, projects, users
	for _, args := range [][]string{
		{"add-bank", "root", "1"},
		{"add-bank", "--parent-bank=root", "physics", "2"},
		{"add-bank", "--parent-bank=root", "chem", "1"},
		{"add-project", "proj-a"},
		{"add-project", "proj-b"},
		{"add-user", "--username=fluxacct-alice", "--bank=physics", "--projects=proj-a", "--max-running-jobs=1"},
		{"add-user", "--username=fluxacct-bob", "--bank=chem"},
	} {
		e.must(append([]string{"account"}, args...)...)
	}
	if _, err := os.Stat(filepath.Join(statedir, "accounting.sqlite")); (err != nil) != (dbconf != "") {
		t.Errorf("the SQLite file in the statedir (database %q): %v", dbconf, err)
	}
	e.fail("bank nosuch is not in the accounting database", "account", "add-user", "--username=fluxacct-bob", "--bank=nosuch")
	// the same words on SQLite and PostgreSQL (TestAccountPostgres)
	e.fail("user fluxacct-alice already belongs to bank physics", "account", "add-user", "--username=fluxacct-alice", "--bank=physics")
	e.fail("--parent-bank=nosuch: bank nosuch", "account", "add-bank", "--parent-bank=nosuch", "x", "1")
	e.fail("project proj-z is not in the accounting database", "account", "edit-user", "fluxacct-bob", "--projects=proj-z")
	tree := e.must("account", "view-bank", "root", "--tree", "--users")
	for _, want := range []string{" physics", "fluxacct-alice", " chem", "fluxacct-bob"} {
		if !strings.Contains(tree, want) {
			t.Errorf("view-bank --tree --users lacks %q:\n%s", want, tree)
		}
	}

	// default bank and project charged, and shown by flux jobs
	first := jobid.MustParse(e.mustAs(aliceUID, "submit", testDuration("60s"), "true"))
	if got := e.field(first, "{bank} {project}"); got != "physics proj-a" {
		t.Errorf("alice's job is charged to %q, want physics proj-a", got)
	}
	e.refusedAs(aliceUID, "bank chem: user fluxacct-alice does not belong to it", "submit", "-B", "chem", "true")
	e.refusedAs(aliceUID, "project proj-b: user fluxacct-alice does not belong to it", "submit", "--project=proj-b", "true")
	e.refusedAs(guestUID, "is not in the accounting database", "submit", "true")
	// a user added without projects has only "*" (flux-accounting's):
	// a job naming another project is refused, one naming none is "*"
	e.refusedAs(bobUID, "project proj-b: user fluxacct-bob does not belong to it (projects: *)", "submit", "--project=proj-b", "true")
	star := jobid.MustParse(e.mustAs(bobUID, "submit", testDuration("0.01s"), "true"))
	if got := e.field(star, "{bank} {project}"); got != "chem *" {
		t.Errorf("the job of bob (no projects) is charged to %q, want chem *", got)
	}
	e.must("account", "edit-user", "fluxacct-bob", "--projects=proj-b")
	bobs := jobid.MustParse(e.mustAs(bobUID, "submit", "--project=proj-b", testDuration("0.01s"), "true"))
	if got := e.field(bobs, "{bank} {project}"); got != "chem proj-b" {
		t.Errorf("bob's job is charged to %q, want chem proj-b", got)
	}

	// the database's max-running-jobs=1 beats the configuration's 5
	e.waitEvent(first, "start")
	second := jobid.MustParse(e.mustAs(aliceUID, "submit", testDuration("0.01s"), "true"))
	e.waitFor("alice's second job held", func() bool {
		return e.field(second, "{status_abbrev} {dependencies}") == "D max-running-jobs-user-limit"
	})
	// raising the limit releases it at once
	e.must("account", "edit-user", "fluxacct-alice", "--max-running-jobs=2")
	e.waitEvent(second, "clean")
	e.must("cancel", first.String())

	// users see their own associations only, and change nothing
	if out := e.mustAs(aliceUID, "account", "view-user", "fluxacct-alice"); !strings.Contains(out, "physics") {
		t.Errorf("alice's view-user:\n%s", out)
	}
	e.refusedAs(aliceUID, "only the instance owner and operators may view other users", "account", "view-user", "fluxacct-bob")
	if out := e.mustAs(aliceUID, "account", "list-users"); strings.Contains(out, "fluxacct-bob") || !strings.Contains(out, "fluxacct-alice") {
		t.Errorf("alice's list-users:\n%s", out)
	}
	e.refusedAs(aliceUID, "only the instance owner may change the accounting database", "account", "add-bank", "--parent-bank=root", "mine", "1")
	if out := e.must("account", "list-users"); !strings.Contains(out, "fluxacct-bob") {
		t.Errorf("the owner's list-users:\n%s", out)
	}

	// a deactivated association refuses jobs; the default moves on
	e.must("account", "add-user", "--username=fluxacct-bob", "--bank=physics")
	e.must("account", "delete-user", "fluxacct-bob", "chem")
	if got := e.field(jobid.MustParse(e.mustAs(bobUID, "submit", testDuration("0.01s"), "true")), "{bank}"); got != "physics" {
		t.Errorf("bob's job after his default bank was deleted: bank %q, want physics", got)
	}
	e.refusedAs(bobUID, "association with it is inactive", "submit", "-B", "chem", "true")
}
