// Command accounting measures the fair-share recompute the accounting
// module runs each interval (read the banks and associations from the
// store, then FairShare) with the store in SQLite and on a PostgreSQL
// server that it starts (pgtest: needs root and the server binaries),
// rounds alternated, and prints both and their ratio.
//
//	go run ./bench/accounting [-users 10000] [-banks 200] [-rounds 5]
//
// With -throughput it measures instead the job pipeline with accounting
// on against without it (throughput.go):
//
//	go run ./bench/accounting -throughput -flux bin/flux [-n 10000] [-pairs 4]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/accounting/pgtest"
)

func main() {
	users := flag.Int("users", 10000, "users (one association each)")
	banks := flag.Int("banks", 200, "banks below root")
	rounds := flag.Int("rounds", 5, "recomputes of each backend")
	throughput := flag.Bool("throughput", false, "measure bench/throughput's pipeline with accounting on against without, alternating (instead of the fair-share recompute)")
	fluxBin := flag.String("flux", "bin/flux", "flux binary (-throughput)")
	jobs := flag.Int("n", 10000, "jobs per bench/throughput run (-throughput)")
	pairs := flag.Int("pairs", 4, "rounds of base, accounting and accounting with the archive, in turn (-throughput)")
	flag.Parse()
	if *throughput {
		if err := benchThroughput(*fluxBin, *jobs, *pairs); err != nil {
			fail(err)
		}
		return
	}
	if *users < 1 || *users > 1000000 || *banks < 1 || *banks > 100000 || *rounds < 1 || *rounds > 1000 {
		fail(fmt.Errorf("-users 1..1000000, -banks 1..100000, -rounds 1..1000"))
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "acctbench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	lite, err := acct.OpenSQLite(ctx, filepath.Join(dir, "accounting.sqlite"))
	if err != nil {
		fail(err)
	}
	defer lite.Close()
	srv, skip, err := pgtest.Start(os.TempDir())
	if skip != "" || err != nil {
		fail(fmt.Errorf("postgres: %s%v", skip, err))
	}
	defer srv.Stop()
	url, err := srv.CreateDB("accounting")
	if err != nil {
		fail(err)
	}
	pg, err := acct.OpenPostgres(ctx, url, "bench")
	if err != nil {
		fail(err)
	}
	defer pg.Close()
	stores := []struct {
		name string
		s    acct.Store
	}{{"sqlite", lite}, {"postgres", pg}}
	for _, st := range stores {
		t0 := time.Now()
		if err := populate(ctx, st.s, *users, *banks); err != nil {
			fail(fmt.Errorf("%s: %w", st.name, err))
		}
		fmt.Printf("%-8s populate %d users in %d banks: %.1f s\n", st.name, *users, *banks, time.Since(t0).Seconds())
	}
	total := make([]time.Duration, len(stores))
	for range *rounds {
		for i, st := range stores {
			t0 := time.Now()
			n, err := recompute(ctx, st.s, *users)
			if err != nil {
				fail(fmt.Errorf("%s: %w", st.name, err))
			}
			if n != *users {
				fail(fmt.Errorf("%s: %d factors, want %d", st.name, n, *users))
			}
			total[i] += time.Since(t0)
		}
	}
	for i, st := range stores {
		fmt.Printf("%-8s fair-share recompute (%d users, %d banks): %.1f ms\n", st.name, *users, *banks,
			float64(total[i].Microseconds())/1000/float64(*rounds))
	}
	fmt.Printf("postgres/sqlite: %.2f\n", float64(total[1])/float64(total[0]))
}

func populate(ctx context.Context, s acct.Store, users, banks int) error {
	if err := s.AddBank(ctx, acct.Bank{Name: "root", Shares: 1}); err != nil {
		return err
	}
	for i := range banks {
		if err := s.AddBank(ctx, acct.Bank{Name: fmt.Sprintf("bank%d", i), Parent: "root", Shares: int64(1 + i%7)}); err != nil {
			return err
		}
	}
	for u := range users {
		a := acct.Association{Username: fmt.Sprintf("u%d", u), Userid: uint32(100000 + u), Bank: fmt.Sprintf("bank%d", u%banks), Shares: int64(1 + u%3)}
		if err := s.AddUser(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// recompute is the module's pass without the archive: the store's banks
// and associations, a usage figure per association, FairShare.
func recompute(ctx context.Context, s acct.Store, users int) (int, error) {
	banks, err := s.Banks(ctx)
	if err != nil {
		return 0, err
	}
	assocs, err := s.Associations(ctx, "")
	if err != nil {
		return 0, err
	}
	usage := make(map[acct.AssocKey]float64, len(assocs))
	for i, a := range assocs {
		usage[acct.AssocKey{Userid: a.Userid, Bank: a.Bank}] = float64(i % 97)
	}
	return len(acct.FairShare(banks, assocs, usage)), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "accounting bench:", err)
	os.Exit(1)
}
