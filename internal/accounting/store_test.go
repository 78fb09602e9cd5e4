package accounting

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// storeSuite is the Store conformance suite: every backend passes it
// (SQLite here; PostgreSQL runs the same body against a server).
func storeSuite(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	ip := func(v int) *int { return &v }
	ip64 := func(v int64) *int64 { return &v }
	sp := func(v string) *string { return &v }

	t.Run("banks", func(t *testing.T) {
		s := open(t)
		for _, b := range []Bank{{Name: "root", Shares: 1}, {Name: "physics", Parent: "root", Shares: 2}, {Name: "cs", Parent: "root", Shares: 1}, {Name: "theory", Parent: "physics", Shares: 1}} {
			if err := s.AddBank(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			b    Bank
			kind error
		}{
			{Bank{Name: "second-root", Shares: 1}, ErrInvalid},
			{Bank{Name: "physics", Parent: "root", Shares: 1}, ErrExists},
			{Bank{Name: "x", Parent: "nosuch", Shares: 1}, ErrNotFound},
			{Bank{Name: "bad name", Parent: "root", Shares: 1}, ErrInvalid},
			{Bank{Name: "neg", Parent: "root", Shares: -1}, ErrInvalid},
			{Bank{Name: "big", Parent: "root", Shares: MaxShares + 1}, ErrInvalid},
			{Bank{Name: "big", Parent: "root", Shares: math.MaxInt64}, ErrInvalid},
			{Bank{Name: strings.Repeat("b", MaxNameLen+1), Parent: "root", Shares: 1}, ErrInvalid},
			{Bank{Name: "bad\xff", Parent: "root", Shares: 1}, ErrInvalid},
			{Bank{Name: "tab\tname", Parent: "root", Shares: 1}, ErrInvalid},
		} {
			if err := s.AddBank(ctx, c.b); !errors.Is(err, c.kind) {
				t.Errorf("AddBank(%+v) = %v, want %v", c.b, err, c.kind)
			}
		}
		if err := s.EditBank(ctx, BankEdit{Name: "physics", Parent: sp("theory")}); !errors.Is(err, ErrInvalid) {
			t.Errorf("a bank moved below itself: %v", err)
		}
		if err := s.AddBank(ctx, Bank{Name: strings.Repeat("b", MaxNameLen), Parent: "cs", Shares: MaxShares}); err != nil {
			t.Errorf("a name of %d bytes, %d shares: %v", MaxNameLen, MaxShares, err)
		}
		if err := s.EditBank(ctx, BankEdit{Name: "cs", Shares: ip64(MaxShares + 1)}); !errors.Is(err, ErrInvalid) {
			t.Errorf("edit-bank --shares=%d: %v", MaxShares+1, err)
		}
		// a bank with active sub-banks or users, and the root, are
		// deleted only with --force
		for _, name := range []string{"physics", "root"} {
			if err := s.DeleteBank(ctx, name, false); !errors.Is(err, ErrInvalid) {
				t.Errorf("delete-bank %s (sub-banks below it): %v, want ErrInvalid", name, err)
			}
		}
		if err := s.AddUser(ctx, Association{Username: "carol", Userid: 3001, Bank: "theory", Shares: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteBank(ctx, "theory", false); err == nil || !strings.Contains(err.Error(), "carol") {
			t.Errorf("delete-bank theory (user carol in it): %v", err)
		}
		if err := s.DeleteUser(ctx, "carol", "theory", false); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"theory", "physics"} {
			if err := s.DeleteBank(ctx, name, false); err != nil {
				t.Fatalf("delete-bank %s: %v", name, err)
			}
		}
		banks, _ := s.Banks(ctx)
		active := map[string]bool{}
		for _, b := range banks {
			active[b.Name] = b.Active
		}
		if active["physics"] || active["theory"] || !active["cs"] {
			t.Errorf("after delete-bank physics: %v", active)
		}
		if err := s.DeleteBank(ctx, "physics", true); err != nil {
			t.Fatal(err)
		}
		if banks, _ = s.Banks(ctx); len(banks) != 3 { // root, cs and the long name below cs
			t.Errorf("after delete-bank --force physics: %v", banks)
		}
	})

	t.Run("users", func(t *testing.T) {
		s := open(t)
		for _, b := range []Bank{{Name: "root", Shares: 1}, {Name: "a", Parent: "root", Shares: 1}, {Name: "b", Parent: "root", Shares: 1}} {
			if err := s.AddBank(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{"p1", "p2"} {
			if err := s.AddProject(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddUser(ctx, Association{Username: "alice", Userid: 1001, Bank: "a", Shares: 1, Projects: []string{"p1", "p2"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddUser(ctx, Association{Username: "alice", Userid: 1001, Bank: "b", Shares: 3, Limits: Limits{MaxRunningJobs: ip(2)}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			a    Association
			kind error
		}{
			{Association{Username: "alice", Bank: "a"}, ErrExists},
			{Association{Username: "bob", Bank: "nosuch"}, ErrNotFound},
			{Association{Username: "bob", Bank: "a", Projects: []string{"nosuch"}}, ErrNotFound},
			{Association{Username: "bob", Bank: "a", Limits: Limits{MaxNodes: ip(-2)}}, ErrInvalid},
			{Association{Username: "bob", Bank: "a", Limits: Limits{MaxCores: ip(MaxLimit + 1)}}, ErrInvalid},
			{Association{Username: "bob", Bank: "a", Shares: MaxShares + 1}, ErrInvalid},
			{Association{Username: strings.Repeat("u", MaxNameLen+1), Bank: "a"}, ErrInvalid},
			// another user's uid, (uid_t)-1, and a uid other than alice's own
			{Association{Username: "bob", Userid: 1001, Bank: "a"}, ErrExists},
			{Association{Username: "bob", Userid: math.MaxUint32, Bank: "a"}, ErrInvalid},
			{Association{Username: "alice", Userid: 1002, Bank: "b"}, ErrExists},
		} {
			if err := s.AddUser(ctx, c.a); !errors.Is(err, c.kind) {
				t.Errorf("AddUser(%+v) = %v, want %v", c.a, err, c.kind)
			}
		}
		as, err := s.Associations(ctx, "alice")
		if err != nil || len(as) != 2 {
			t.Fatalf("Associations: %v %v", as, err)
		}
		if as[0].DefaultBank != "a" || as[0].DefaultProject != "p1" || !slices.Equal(as[0].Projects, []string{"p1", "p2"}) {
			t.Errorf("first bank and project should be the defaults: %+v", as[0])
		}
		if as[1].MaxRunningJobs == nil || *as[1].MaxRunningJobs != 2 || as[1].Shares != 3 || as[0].MaxRunningJobs != nil {
			t.Errorf("limits: %+v %+v", as[0].Limits, as[1].Limits)
		}
		yes := true
		if err := s.EditUser(ctx, UserEdit{Username: "alice", Bank: "b", DefaultBank: sp("b"), Exempt: &yes,
			Limits: Limits{MaxRunningJobs: ip(-1)}, DefaultProject: sp("p2")}); err != nil {
			t.Fatal(err)
		}
		as, _ = s.Associations(ctx, "alice")
		if as[1].DefaultBank != "b" || !as[1].Exempt || as[0].Exempt || as[1].MaxRunningJobs != nil || as[1].DefaultProject != "p2" {
			t.Errorf("after edit-user: %+v", as)
		}
		if err := s.EditUser(ctx, UserEdit{Username: "alice", DefaultBank: sp("nosuch")}); !errors.Is(err, ErrNotFound) {
			t.Errorf("--default-bank=nosuch: %v", err)
		}
		if err := s.AddUser(ctx, Association{Username: "bob", Userid: 1002, Bank: "a", Shares: 1}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			uid  uint32
			kind error
		}{{1001, ErrExists}, {math.MaxUint32, ErrInvalid}} {
			if err := s.EditUser(ctx, UserEdit{Username: "bob", Userid: &c.uid}); !errors.Is(err, c.kind) {
				t.Errorf("edit-user bob --userid=%d: %v, want %v", c.uid, err, c.kind)
			}
		}
		if err := s.EditUser(ctx, UserEdit{Username: "bob", Limits: Limits{MaxNodes: ip(MaxLimit + 1)}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("edit-user bob --max-nodes=%d: %v", MaxLimit+1, err)
		}
		// a corrected uid takes the usage history written under the
		// wrong one with it
		if us, ok := s.(UsageStore); ok {
			if err := us.SetUsage(ctx, []UsagePeriod{{Username: "bob", Bank: "a", Start: 0, Jobs: 1, CoreHours: 1},
				{Username: "alice", Bank: "a", Start: 0, Jobs: 1, CoreHours: 2}}); err != nil {
				t.Fatal(err)
			}
			uid := uint32(1005)
			if err := s.EditUser(ctx, UserEdit{Username: "bob", Userid: &uid}); err != nil {
				t.Fatal(err)
			}
			hist, err := us.UsageHistory(ctx, UsageFilter{})
			if err != nil || len(hist) != 1 || hist[0].Username != "alice" {
				t.Errorf("usage history after bob's uid changed: %+v %v", hist, err)
			}
		}
		if as, _ := s.Associations(ctx, "bob"); len(as) != 1 || as[0].Userid != 1005 {
			t.Errorf("bob after edit-user --userid=1005: %+v", as)
		}
		if err := s.DeleteUser(ctx, "bob", "a", true); err != nil {
			t.Fatal(err)
		}
		if err := s.EditUser(ctx, UserEdit{Username: "nobody"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("edit-user nobody: %v", err)
		}
		if err := s.DeleteProject(ctx, "p2"); !errors.Is(err, ErrInvalid) {
			t.Errorf("deleting a default project: %v", err)
		}
		// deactivating the default bank moves the default to another
		if err := s.DeleteUser(ctx, "alice", "b", false); err != nil {
			t.Fatal(err)
		}
		as, _ = s.Associations(ctx, "alice")
		if len(as) != 2 || as[1].Active || as[0].DefaultBank != "a" {
			t.Errorf("after delete-user alice b: %+v", as)
		}
		// adding it again reactivates it
		if err := s.AddUser(ctx, Association{Username: "alice", Userid: 1001, Bank: "b", Shares: 1}); err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"a", "b"} {
			if err := s.DeleteUser(ctx, "alice", b, true); err != nil {
				t.Fatal(err)
			}
		}
		if as, _ = s.Associations(ctx, ""); len(as) != 0 {
			t.Errorf("after delete-user --force of both banks: %+v", as)
		}
		if err := s.DeleteUser(ctx, "alice", "a", false); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("deleting a deleted user: %v", err)
		}
	})

	t.Run("projects", func(t *testing.T) {
		s := open(t)
		if err := s.AddProject(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		if err := s.AddProject(ctx, "p"); !errors.Is(err, ErrExists) {
			t.Errorf("second add-project: %v", err)
		}
		if err := s.DeleteProject(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteProject(ctx, "p"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete-project: %v", err)
		}
	})
}

func TestSQLiteStore(t *testing.T) {
	storeSuite(t, func(t *testing.T) Store {
		s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "accounting.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A database outlives its store: reopened, it has what was written.
func TestSQLiteReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "accounting.sqlite")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddBank(ctx, Bank{Name: "root", Shares: 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = OpenSQLite(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if banks, err := s.Banks(ctx); err != nil || len(banks) != 1 {
		t.Fatalf("reopened: %v %v", banks, err)
	}
}

func TestPostgresRebind(t *testing.T) {
	s := &SQLStore{d: PostgresDialect}
	if got := s.rebind("SELECT a FROM t WHERE x = ? AND y = ?"); got != "SELECT a FROM t WHERE x = $1 AND y = $2" {
		t.Errorf("rebind: %s", got)
	}
}
