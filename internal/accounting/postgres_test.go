package accounting

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fluxgo/fluxgo/internal/accounting/pgtest"
)

// pgServer is the package's PostgreSQL server, started once in TestMain
// (nil, with pgSkip saying why, where it cannot run).
var (
	pgServer *pgtest.Server
	pgURL    string
	pgSkip   string
	pgN      atomic.Int64
)

func TestMain(m *testing.M) {
	var err error
	pgServer, pgSkip, err = pgtest.Start(os.TempDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		os.Exit(1)
	}
	if pgServer != nil {
		if pgURL, err = pgServer.CreateDB("accounting"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			pgServer.Stop()
			os.Exit(1)
		}
	}
	code := m.Run()
	if pgServer != nil {
		if err := pgServer.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// openPostgres opens a store in a cluster schema of its own on the
// package's server (skipping when there is none).
func openPostgres(t testing.TB) *SQLStore {
	if pgServer == nil {
		t.Skip(pgSkip)
	}
	s, err := OpenPostgres(context.Background(), pgURL, fmt.Sprintf("t%d", pgN.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgresStore(t *testing.T) {
	storeSuite(t, func(t *testing.T) Store { return openPostgres(t) })
}

// Two clusters on one database do not see each other's banks.
func TestPostgresClusters(t *testing.T) {
	if pgServer == nil {
		t.Skip(pgSkip)
	}
	ctx := context.Background()
	a, err := OpenPostgres(ctx, pgURL, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenPostgres(ctx, pgURL, "beta")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.AddBank(ctx, Bank{Name: "root", Shares: 1}); err != nil {
		t.Fatal(err)
	}
	if banks, err := b.Banks(ctx); err != nil || len(banks) != 0 {
		t.Errorf("cluster beta sees %v (%v)", banks, err)
	}
	if err := b.AddBank(ctx, Bank{Name: "root", Shares: 3}); err != nil {
		t.Errorf("beta's own root bank: %v", err)
	}
}

// A server that is not there is an error naming it, not a hang.
func TestPostgresUnreachable(t *testing.T) {
	_, err := OpenPostgres(context.Background(), "postgres://nobody@127.0.0.1:1/acct?connect_timeout=5", "c")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1/acct") {
		t.Fatalf("unreachable server: %v", err)
	}
	if _, err := OpenPostgres(context.Background(), "host=/x", "bad name"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad cluster name: %v", err)
	}
}
