package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestOperators: a root instance whose [access] table names one real
// user operator. The operator sees and cancels another user's job,
// drains and undrains a node, reads flux dmesg and everyone's usage; a
// plain user (nobody) may do none of it and is told so; the operator
// still may not shut the instance down, load a module or reload the
// configuration (issue 25 item 5).
func TestOperators(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	opUID := testUser(t, "fluxop-alice")
	userUID := testUser(t, "fluxop-bob")
	conf := t.TempDir()
	toml := "[access]\noperators = [\"fluxop-alice\"]\n\n[archive]\nperiod = \"0.5s\"\n"
	if err := os.WriteFile(filepath.Join(conf, "access.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2,
		Args: []string{"--config-path", conf, "-S", "statedir=" + t.TempDir(), "-S", "job-list.private=1"}})}
	if !canRunAsGuest(e) {
		t.Skip("the flux binary is not reachable by other users")
	}

	// the operator's connection holds the user and operator roles, not
	// the owner's (ping echoes the rolemask the service saw)
	if out := e.mustAs(opUID, "ping", "--count=1", "--userid", "broker"); !strings.Contains(out, "rolemask=0xe") {
		t.Errorf("operator's ping: %s, want rolemask=0xe (user|local|operator)", out)
	}
	if out := e.mustAs(guestUID, "ping", "--count=1", "--userid", "broker"); !strings.Contains(out, "rolemask=0x6") {
		t.Errorf("guest's ping: %s, want rolemask=0x6 (user|local)", out)
	}

	// bob's job: the operator sees it, its eventlog and its record; the
	// plain user does not
	id := jobid.MustParse(e.mustAs(userUID, "submit", testDuration("300s"), "true"))
	e.waitEvent(id, "start")
	if out := e.mustAs(opUID, "jobs", "-A", "-n", "-o", "{id} {userid}"); !strings.Contains(out, fmt.Sprintf("%s %d", id, userUID)) {
		t.Errorf("operator's flux jobs -A lacks bob's job %s:\n%s", id, out)
	}
	if out := e.mustAs(guestUID, "jobs", "-A", "-n", "-o", "{id}"); strings.Contains(out, id.String()) {
		t.Errorf("plain user's flux jobs -A shows bob's job:\n%s", out)
	}
	if out := e.mustAs(opUID, "job", "eventlog", id.String()); !strings.Contains(out, "start") {
		t.Errorf("operator's flux job eventlog: %s", out)
	}
	e.refusedAs(guestUID, "belongs to another user", "job", "eventlog", id.String())
	if out := e.mustAs(opUID, "job", "info", id.String(), "jobspec"); !strings.Contains(out, "tasks") {
		t.Errorf("operator's flux job info jobspec: %s", out)
	}
	e.refusedAs(guestUID, "belongs to another user", "job", "info", id.String(), "jobspec")
	e.refusedAs(guestUID, "guests may only update their own jobs", "update", id.String(), "name=renamed")
	e.mustAs(opUID, "update", id.String(), "name=renamed")
	if got := e.field(id, "{name}"); got != "renamed" {
		t.Errorf("bob's job is named %q after the operator's flux update name=renamed", got)
	}

	// cancel, urgency and kill: refused to the plain user, done by the
	// operator (and the cancel recorded as theirs)
	held := jobid.MustParse(e.mustAs(userUID, "submit", "--urgency=0", testDuration("300s"), "true"))
	e.refusedAs(guestUID, "belongs to another user", "cancel", held.String())
	e.refusedAs(guestUID, "guests can only raise exceptions on their own jobs", "cancel", "--user=all")
	e.refusedAs(guestUID, "belongs to another user", "job", "urgency", held.String(), "10")
	e.refusedAs(guestUID, "guests may only send signals to their own jobs", "job", "kill", id.String())
	e.mustAs(opUID, "job", "urgency", held.String(), "10")
	if got := e.field(held, "{urgency}"); got != "10" {
		t.Errorf("bob's held job has urgency %s after the operator's flux job urgency 10", got)
	}
	e.refusedAs(opUID, "only the instance owner may set urgency above", "job", "urgency", held.String(), "31")
	e.mustAs(opUID, "cancel", held.String())
	e.waitEvent(held, "clean")
	ex, ok := find(e.events(held), "exception")
	if !ok || ctxOf(t, ex)["userid"] != float64(opUID) {
		t.Errorf("bob's job exception %+v, want one raised by uid %d", ex, opUID)
	}
	e.mustAs(opUID, "job", "kill", id.String())
	e.waitEvent(id, "clean")

	// usage: the operator sees bob's archived job, the plain user not
	e.waitFor("bob's job archived, as the operator sees it", func() bool {
		r := e.asUser(opUID, "usage", "--jobs", "-o", "csv")
		return r.Code == 0 && strings.Contains(r.Stdout, "fluxop-bob")
	})
	if r := e.asUser(guestUID, "usage", "--jobs", "-o", "csv"); r.Code != 0 || strings.Contains(r.Stdout, "fluxop-bob") {
		t.Errorf("plain user's usage --jobs: %+v, want success without bob's job", r)
	}
	// the cluster report: the archive sends the resource eventlog and R,
	// which the primary namespace refuses an operator
	if r := e.asUser(opUID, "usage", "--cluster", "--per=total", "-o", "csv"); r.Code != 0 || !strings.Contains(r.Stdout, "allocated") {
		t.Errorf("operator's usage --cluster: %+v", r)
	}
	e.refusedAs(guestUID, "for the instance owner and operators", "usage", "--cluster")

	// drain and undrain
	e.refusedAs(guestUID, "only the instance owner or an operator may drain nodes", "resource", "drain", "1", "maintenance")
	e.mustAs(opUID, "resource", "drain", "1", "maintenance")
	if out := e.must("resource", "drain", "-n", "-o", "{ranks} {reason}"); !strings.Contains(out, "1 maintenance") {
		t.Errorf("rank 1 is not drained after the operator's drain:\n%s", out)
	}
	e.refusedAs(guestUID, "only the instance owner or an operator may undrain nodes", "resource", "undrain", "1")
	e.mustAs(opUID, "resource", "undrain", "1")
	if out := e.must("resource", "drain", "-n", "-o", "{ranks}"); strings.Contains(out, "1") {
		t.Errorf("rank 1 is still drained after the operator's undrain:\n%s", out)
	}

	// the broker log
	if out := e.mustAs(opUID, "dmesg"); !strings.Contains(out, "broker") {
		t.Errorf("operator's flux dmesg: %q", out)
	}
	e.refusedAs(guestUID, "only the instance owner or an operator may do this", "dmesg")

	// the owner's powers stay the owner's
	e.refusedAs(opUID, "broker.shutdown: only the instance owner may do this", "shutdown")
	e.refusedAs(opUID, "module.load: only the instance owner may do this", "module", "load", "job-archive")
	e.refusedAs(opUID, "config.reload: only the instance owner may do this", "config", "reload")
	e.refusedAs(opUID, "may not access it", "kvs", "put", "operator-was-here=1")
	if e.flux("kvs", "get", "operator-was-here").Code == 0 {
		t.Error("the operator wrote to the primary KVS namespace")
	}
	e.must("resource", "list") // the instance is still up
}
