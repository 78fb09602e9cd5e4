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
		{"user without project list", 1002, false, "", "p3", "b", "p3", 0},
		{"user without default project", 1002, false, "", "", "b", "", 0},
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
	var empty *Index
	if b, p, err := empty.Charge(5, false, "any", "thing"); err != nil || b != "any" || p != "thing" {
		t.Errorf("no database: %q %q %v", b, p, err)
	}
}
