package accounting

import (
	"errors"
	"syscall"
	"testing"
)

func TestIndexCharge(t *testing.T) {
	x := NewIndex(Snapshot{
		Projects: []string{"p1", "p2", "p3"},
		Associations: []Association{
			{Username: "alice", Userid: 1001, Bank: "a", Active: true, DefaultBank: "a", Projects: []string{"p1", "p2"}, DefaultProject: "p1"},
			{Username: "alice", Userid: 1001, Bank: "b", Active: true, DefaultBank: "a", Projects: []string{"p1", "p2"}, DefaultProject: "p1"},
			{Username: "alice", Userid: 1001, Bank: "old", Active: false, DefaultBank: "a", Projects: []string{"p1", "p2"}, DefaultProject: "p1"},
			{Username: "bob", Userid: 1002, Bank: "b", Active: true, DefaultBank: "b"},
		},
	})
	for _, c := range []struct {
		name          string
		uid           uint32
		owner         bool
		bank, project string
		wantBank      string
		wantProject   string
		errno         syscall.Errno
	}{
		{"defaults", 1001, false, "", "", "a", "p1", 0},
		{"named bank and project", 1001, false, "b", "p2", "b", "p2", 0},
		{"foreign bank", 1001, false, "c", "", "", "", syscall.EPERM},
		{"inactive association", 1001, false, "old", "", "", "", syscall.EPERM},
		{"project not the user's", 1001, false, "", "p3", "", "", syscall.EPERM},
		{"no such project", 1001, false, "", "nosuch", "", "", syscall.EINVAL},
		// a user without projects has only "*", as in flux-accounting
		{"user without project list", 1002, false, "", "p3", "", "", syscall.EPERM},
		{"user without default project", 1002, false, "", "", "b", "*", 0},
		{"user without project list names *", 1002, false, "", "*", "b", "*", 0},
		{"user with projects names *", 1001, false, "", "*", "a", "*", 0},
		{"unknown user", 1003, false, "", "", "", "", syscall.EPERM},
		{"unknown owner passes", 1003, true, "x", "y", "x", "y", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			bank, project, err := x.Charge(c.uid, c.owner, c.bank, c.project)
			if c.errno != 0 {
				if !errors.Is(err, c.errno) {
					t.Fatalf("err = %v, want %v", err, c.errno)
				}
				return
			}
			if err != nil || bank != c.wantBank || project != c.wantProject {
				t.Fatalf("Charge = %q %q %v, want %q %q", bank, project, err, c.wantBank, c.wantProject)
			}
		})
	}
	if _, _, err := x.Charge(1001, false, "c", ""); err == nil || err.Error() != "bank c: user alice does not belong to it (banks: a, b)" {
		t.Errorf("foreign bank error: %v", err)
	}
	if _, _, err := x.Charge(1002, false, "", "p1"); err == nil || err.Error() != "project p1: user bob does not belong to it (projects: *)" {
		t.Errorf("project of a user without projects: %v", err)
	}
	// without projects in the database, a project is a free tag
	free := NewIndex(Snapshot{Associations: []Association{{Username: "bob", Userid: 1002, Bank: "b", Active: true, DefaultBank: "b"}}})
	if b, p, err := free.Charge(1002, false, "", "anything"); err != nil || b != "b" || p != "anything" {
		t.Errorf("no projects in the database: %q %q %v", b, p, err)
	}
	if _, p, err := free.Charge(1002, false, "", ""); err != nil || p != "" {
		t.Errorf("no projects in the database, none named: %q %v", p, err)
	}
	var empty *Index
	if b, p, err := empty.Charge(5, false, "any", "thing"); err != nil || b != "any" || p != "thing" {
		t.Errorf("no database: %q %q %v", b, p, err)
	}
}
