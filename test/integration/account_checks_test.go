package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestAccountChecks: what a new admin tried in QA (issue 25) is refused
// with an error naming the option, the value and the rule, and leaves
// the database as it was: uids that are another user's, shares and
// limits past their maximum, overlong or invalid names, deleting a bank
// still in use or the root, a project the user is not in, empty option
// values, unknown users and banks in reports. An operator may see why
// any job has its priority. A uid corrected with edit-user --userid
// takes the usage history written under the wrong one with it.
func TestAccountChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	aUID := testUser(t, "fluxchk-a")
	bUID := testUser(t, "fluxchk-b")
	opUID := testUser(t, "fluxchk-op")
	conf := t.TempDir()
	toml := `[access]
operators = ["fluxchk-op"]

[archive]
period = "0.5s"

[job-manager]
plugins = [ { load = "mf-priority" } ]
`
	if err := os.WriteFile(filepath.Join(conf, "chk.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	statedir := t.TempDir()
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1,
		Args: []string{"--config-path", conf, "-S", "statedir=" + statedir}})}
	if !canRunAsGuest(e) {
		t.Skip("the flux binary is not reachable by other users")
	}
	a, b := strconv.Itoa(int(aUID)), strconv.Itoa(int(bUID))
	for _, args := range [][]string{
		{"add-bank", "root", "1"},
		{"add-bank", "--parent-bank=root", "chem", "1"},
		{"add-user", "--username=fluxchk-a", "--bank=chem"},
	} {
		e.must(append([]string{"account"}, args...)...)
	}

	// 1. uids: the host's, and one per user
	e.fail("--userid="+a+": this host's user fluxchk-b has uid "+b, "account", "add-user", "--username=fluxchk-b", "--userid="+a, "--bank=chem")
	e.fail("uid "+a+" is this host's user fluxchk-a", "account", "add-user", "--username=fluxchk-nohost", "--userid="+a, "--bank=chem")
	e.fail("--userid=0 is root's uid", "account", "add-user", "--username=fluxchk-b", "--userid=0", "--bank=chem")
	e.must("account", "add-user", "--username=fluxchk-b", "--bank=chem")
	e.fail("this host's user fluxchk-b has uid "+b, "account", "edit-user", "fluxchk-b", "--userid="+a)
	e.fail("want a uid from 0 to 4294967294", "account", "edit-user", "fluxchk-b", "--userid=4294967295")
	e.fail("want a uid from 0 to 4294967294", "account", "add-user", "--username=fluxchk-b", "--userid=-1", "--bank=chem")
	// a user this host does not know (another cluster's) keeps a uid of its own
	ghost := uint32(3_999_000)
	for ; ghost < 3_999_100; ghost++ {
		if _, err := user.LookupId(strconv.Itoa(int(ghost))); err != nil {
			break
		}
	}
	g := strconv.Itoa(int(ghost))
	e.must("account", "add-user", "--username=fluxchk-ghost", "--userid="+g, "--bank=chem")
	e.fail("uid "+g+" is user fluxchk-ghost's in the accounting database", "account", "add-user", "--username=fluxchk-ghost2", "--userid="+g, "--bank=chem")
	uids := map[string]uint32{}
	var as []accounting.Association
	if err := json.Unmarshal([]byte(e.must("account", "list-users", "--json")), &as); err != nil {
		t.Fatal(err)
	}
	for _, x := range as {
		uids[x.Username] = x.Userid
	}
	if len(uids) != 3 || uids["fluxchk-a"] != aUID || uids["fluxchk-b"] != bUID || uids["fluxchk-ghost"] != ghost {
		t.Errorf("the users after the refusals: %v", uids)
	}

	// 2. shares and limits are bounded
	e.fail("SHARES=\"9223372036854775807\": want a whole number from 0 to 2147483647", "account", "add-bank", "--parent-bank=root", "big", "9223372036854775807")
	e.fail("bank chem: shares=2147483648: want 0 to 2147483647", "account", "edit-bank", "chem", "--shares=2147483648")
	e.fail("max-cores=2147483648: at most 2147483647", "account", "edit-user", "fluxchk-a", "--max-cores=2147483648")
	e.fail("shares=2147483648: want 0 to 2147483647", "account", "edit-user", "fluxchk-a", "--shares=2147483648")
	e.must("account", "add-bank", "--parent-bank=root", "big", "2147483647")

	// 3. names: at most 255 bytes of printable UTF-8
	e.fail("is 5000 bytes: at most 255 are allowed", "account", "add-bank", "--parent-bank=root", strings.Repeat("b", 5000), "1")
	e.fail("is 3000 bytes: at most 255 are allowed", "account", "add-project", strings.Repeat("p", 3000))
	e.fail("argument 1 \"bad\\xffname\" is not valid UTF-8", "account", "add-bank", "--parent-bank=root", "bad\xffname", "1")
	e.fail("only printable characters", "account", "add-project", "bell\a")
	e.fail("cannot be added", "account", "add-project", "*")

	// 4. delete-bank: not the root, not a bank in use, without --force
	e.fail("bank root is the root bank", "account", "delete-bank", "root")
	e.fail("bank chem has 3 active users (fluxchk-a, fluxchk-b, fluxchk-ghost)", "account", "delete-bank", "chem")
	e.must("account", "add-bank", "--parent-bank=big", "small", "1")
	e.fail("bank big has 1 active sub-banks (small)", "account", "delete-bank", "big")
	e.must("account", "add-user", "--username=fluxchk-ghost", "--bank=small")
	if r := e.flux("account", "delete-bank", "big", "--force"); r.Code != 0 || !strings.Contains(r.Stderr, "removing bank big, 1 banks below it and 1 associations") {
		t.Errorf("delete-bank big --force: %+v", r)
	}
	var banks []accounting.Bank
	if err := json.Unmarshal([]byte(e.must("account", "list-banks", "--json")), &banks); err != nil {
		t.Fatal(err)
	}
	if len(banks) != 2 || !banks[0].Active || !banks[1].Active {
		t.Errorf("the banks after delete-bank: %+v", banks)
	}

	// 5. once there are projects, a user without any has only "*"
	e.must("account", "add-project", "climate")
	e.refusedAs(aUID, "project climate: user fluxchk-a does not belong to it (projects: *)", "submit", "--project=climate", "true")
	held := jobid.MustParse(e.mustAs(aUID, "submit", "--urgency=0", "true"))
	if got := e.field(held, "{bank} {project}"); got != "chem *" {
		t.Errorf("fluxchk-a's job is charged to %q, want chem *", got)
	}

	// 6. an operator may see why any job has its priority; another user not
	if out := e.mustAs(opUID, "job", "priority", "--explain", held.String()); !strings.Contains(out, "FACTOR") {
		t.Errorf("the operator's --explain of another user's job:\n%s", out)
	}
	e.refusedAs(bUID, "only its user, operators and the instance owner may ask", "job", "priority", "--explain", held.String())
	e.must("cancel", held.String())

	// 7. the nits
	e.refusedAs(bUID, "update-usage: only the instance owner may", "account", "update-usage")
	e.fail("--bank=nosuch: bank nosuch is not in the accounting database", "account", "list-users", "-B", "nosuch")
	e.fail("--username=nosuch: user nosuch is not in the accounting database", "account", "view-usage-report", "-u", "nosuch")
	e.fail("--bank=nosuch: bank nosuch is not in the accounting database", "account", "view-usage-report", "-b", "nosuch")
	var listed []string
	if out := e.must("account", "view-user", "--json", "--list-banks", "fluxchk-a"); json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0] != "chem" {
		t.Errorf("view-user --json --list-banks: %q", out)
	}
	e.fail("view-user needs one USERNAME", "account", "view-user")
	e.refusedAs(aUID, `invalid argument "" for "-B, --bank" flag: an empty name`, "submit", "-B", "", "true")
	e.refusedAs(aUID, `invalid argument "" for "--project" flag: an empty name`, "submit", "--project=", "true")
	e.fail("an empty name", "account", "list-users", "-B", "")

	// 1, the usage history: a database that gave fluxchk-b fluxchk-a's
	// uid (written before the checks) charged a's jobs to b; the
	// corrected uid leaves a's rows and none of b's
	setUID(t, filepath.Join(statedir, "accounting.sqlite"), "fluxchk-b", aUID)
	job := jobid.MustParse(e.mustAs(aUID, "submit", "true"))
	e.waitEvent(job, "clean")
	report := func() map[string]int64 {
		var ps []accounting.UsagePeriod
		if err := json.Unmarshal([]byte(e.must("account", "view-usage-report", "--json")), &ps); err != nil {
			t.Fatal(err)
		}
		jobs := map[string]int64{}
		for _, p := range ps {
			jobs[p.Username] += p.Jobs
		}
		return jobs
	}
	var merged map[string]int64
	e.waitFor("fluxchk-a's job in the usage history", func() bool {
		e.must("account", "update-usage")
		merged = report()
		return len(merged) > 0
	})
	// the pass names a uid after the last of its users (by name)
	if merged["fluxchk-b"] == 0 {
		t.Fatalf("with fluxchk-a's uid, fluxchk-b was not charged fluxchk-a's job: %v", merged)
	}
	e.must("account", "edit-user", "fluxchk-b", "--userid="+b)
	if got := report(); got["fluxchk-b"] != 0 || got["fluxchk-a"] < 1 {
		t.Errorf("the usage history after fluxchk-b's uid was corrected: %v (before: %v), want fluxchk-a's job and nothing of fluxchk-b's", got, merged)
	}

	// 8. a held job's dependency names what holds it now
	e.must("account", "edit-user", "fluxchk-a", "--max-running-jobs=1", "--max-cores=1")
	first := jobid.MustParse(e.mustAs(aUID, "submit", testDuration("60s"), "true"))
	e.waitEvent(first, "start")
	second := jobid.MustParse(e.mustAs(aUID, "submit", "true"))
	e.waitFor("the second job held on max-running-jobs", func() bool {
		return e.field(second, "{status_abbrev} {dependencies}") == "D max-running-jobs-user-limit"
	})
	e.must("account", "edit-user", "fluxchk-a", "--max-running-jobs=2")
	e.waitFor("the second job held on max-cores", func() bool {
		return e.field(second, "{status_abbrev} {dependencies}") == "D max-resources-user-limit"
	})
	e.must("account", "edit-user", "fluxchk-a", "--max-cores=2")
	e.waitEvent(second, "clean")
	e.must("cancel", first.String())
}

// setUID writes a uid into the accounting database behind the module's
// back, as a database from before the uid checks may hold it.
func setUID(t *testing.T, path, username string, uid uint32) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "UPDATE users SET userid = ? WHERE username = ?", int64(uid), username); err != nil {
		t.Fatal(err)
	}
}
