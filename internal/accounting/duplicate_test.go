package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// backends opens an *SQLStore of each kind (PostgreSQL skipped where
// there is no server).
var backends = []struct {
	name string
	open func(t *testing.T) *SQLStore
}{
	{"sqlite", func(t *testing.T) *SQLStore {
		s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "a.sqlite"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"postgres", func(t *testing.T) *SQLStore { return openPostgres(t) }},
}

// A row the database itself refuses as a duplicate (SQLSTATE 23505 on
// PostgreSQL, a UNIQUE constraint on SQLite) is ErrExists on both, and
// add-user twice gives the same error text on both.
func TestDuplicateIsErrExists(t *testing.T) {
	ctx := context.Background()
	var texts []string
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			if err := s.AddBank(ctx, Bank{Name: "root", Shares: 1}); err != nil {
				t.Fatal(err)
			}
			// past the store's own checks: the database refuses it
			runs := 0
			err := s.tx(ctx, func(tx *sql.Tx) error {
				runs++
				_, err := s.exec(ctx, tx, "INSERT INTO banks (name, parent, shares, active) VALUES (?, '', 1, 1)", "root")
				return err
			})
			var se *Error
			if !errors.Is(err, ErrExists) || !errors.As(err, &se) || !strings.Contains(err.Error(), "already has") {
				t.Fatalf("a duplicate bank row: %v (%T), want ErrExists", err, err)
			}
			if runs != txRuns {
				t.Errorf("the transaction ran %d times, want %d", runs, txRuns)
			}
			t.Logf("%s: %v", b.name, err)
			a := Association{Username: "alice", Userid: 1001, Bank: "root"}
			if err := s.AddUser(ctx, a); err != nil {
				t.Fatal(err)
			}
			err = s.AddUser(ctx, a)
			if !errors.Is(err, ErrExists) {
				t.Fatalf("add-user twice: %v, want ErrExists", err)
			}
			texts = append(texts, err.Error())
		})
	}
	if len(texts) == 2 && texts[0] != texts[1] {
		t.Errorf("add-user twice: SQLite says %q, PostgreSQL %q", texts[0], texts[1])
	}
}

// Two clients of one PostgreSQL database adding the same rows at once:
// each row is added once and every other attempt is ErrExists with the
// store's own words; a user added to two banks at once (both insert the
// user's row) ends in both.
func TestPostgresConcurrentAdd(t *testing.T) {
	if pgServer == nil {
		t.Skip(pgSkip)
	}
	ctx := context.Background()
	cluster := fmt.Sprintf("race%d", pgN.Add(1))
	var stores [2]*SQLStore
	var refused atomic.Int64
	for i := range stores {
		s, err := OpenPostgres(ctx, pgURL, cluster)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		d := s.d
		s.d.Duplicate = func(err error) (bool, string) {
			dup, key := d.Duplicate(err)
			if dup {
				refused.Add(1)
			}
			return dup, key
		}
		stores[i] = s
	}
	for _, b := range []Bank{{Name: "root", Shares: 1}, {Name: "a", Parent: "root", Shares: 1}, {Name: "b", Parent: "root", Shares: 1}} {
		if err := stores[0].AddBank(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	const users, tries = 10, 4
	var wg sync.WaitGroup
	errs := make([][]error, users)
	for u := range users {
		errs[u] = make([]error, tries)
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				bank := "a"
				if i >= tries/2 {
					bank = "b"
				}
				errs[u][i] = stores[i%2].AddUser(ctx, Association{Username: fmt.Sprintf("u%d", u), Userid: uint32(2000 + u), Bank: bank})
			}()
		}
	}
	wg.Wait()
	for u := range users {
		ok := 0
		for i, err := range errs[u] {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrExists) && strings.Contains(err.Error(), "already belongs to bank"):
			default:
				t.Errorf("u%d, try %d: %v", u, i, err)
			}
		}
		if ok != 2 {
			t.Errorf("u%d: %d adds succeeded, want 2 (one per bank): %v", u, ok, errs[u])
		}
		as, err := stores[1].Associations(ctx, fmt.Sprintf("u%d", u))
		if err != nil || len(as) != 2 {
			t.Errorf("u%d's associations: %+v %v", u, as, err)
		}
	}
	t.Logf("the server refused %d duplicate rows (their transactions run again)", refused.Load())
}
