package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/accounting/pgtest"
	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// startPostgres starts a PostgreSQL server for the test (stopped when it
// ends) and returns the URL of a new database on it, or skips.
func startPostgres(t *testing.T) string {
	t.Helper()
	srv, skip, err := pgtest.Start(os.TempDir())
	if skip != "" {
		t.Skip(skip)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	url, err := srv.CreateDB("accounting")
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// TestAccountPostgres: TestAccount's, TestFairSharePriority's and
// TestAccountUsageReport's bodies with the database on a PostgreSQL
// server (each in a cluster schema of its own), and two instances
// sharing that server under different cluster names, each seeing only
// its own users (issue 25).
func TestAccountPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server and instances")
	}
	url := startPostgres(t)
	dbconf := func(cluster string) string {
		return fmt.Sprintf("database = %q\ncluster = %q\n", url, cluster)
	}
	t.Run("unreachable", func(t *testing.T) {
		conf := t.TempDir()
		bad := "host=" + conf + " user=postgres dbname=accounting connect_timeout=5"
		if err := os.WriteFile(filepath.Join(conf, "acct.toml"), []byte(fmt.Sprintf("[accounting]\ndatabase = %q\ncluster = \"c\"\n", bad)), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, testinstance.Binary(t), "start", "--config-path", conf, "true").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "accounting database server "+conf) {
			t.Fatalf("flux start with an unreachable accounting server: %v:\n%s", err, out)
		}
	})
	t.Run("account", func(t *testing.T) { accountBody(t, dbconf("main")) })
	t.Run("fairshare", func(t *testing.T) { fairShareBody(t, dbconf("fairshare")) })
	t.Run("usage", func(t *testing.T) { accountUsageBody(t, dbconf("usage")) })

	t.Run("clusters", func(t *testing.T) {
		start := func(cluster string) *env {
			conf := t.TempDir()
			if err := os.WriteFile(filepath.Join(conf, "acct.toml"), []byte("[accounting]\n"+dbconf(cluster)), 0o644); err != nil {
				t.Fatal(err)
			}
			return &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
		}
		a, b := start("alpha"), start("beta")
		a.must("account", "add-bank", "root", "1")
		a.must("account", "add-user", "--username=daemon", "--bank=root")
		b.must("account", "add-bank", "root", "1")
		if out := a.must("account", "list-users"); !strings.Contains(out, "daemon") {
			t.Errorf("cluster alpha lost its user daemon:\n%s", out)
		}
		if out := b.must("account", "list-users"); strings.Contains(out, "daemon") {
			t.Errorf("cluster beta sees alpha's user daemon:\n%s", out)
		}
		b.must("account", "add-user", "--username=daemon", "--bank=root", "--max-running-jobs=3")
		av, bv := a.must("account", "view-user", "daemon"), b.must("account", "view-user", "daemon")
		if strings.Contains(av, " 3 ") || !strings.Contains(bv, " 3 ") {
			t.Errorf("beta's max-running-jobs=3 for daemon is not beta's only:\nalpha:\n%s\nbeta:\n%s", av, bv)
		}
	})
}
