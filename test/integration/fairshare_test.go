package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestFairSharePriority: with the mf-priority plugin loaded, a heavy
// user (archived usage) and a light one (none) in the same bank: the
// light user's pending job gets the higher priority, and flux job
// priority --explain shows the factors and weights (issue 25).
func TestFairSharePriority(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	fairShareBody(t, "")
}

// fairShareBody is TestFairSharePriority's body; dbconf is the
// [accounting] lines that name a PostgreSQL database ("": the SQLite
// file in the statedir; TestAccountPostgres runs it with one).
func fairShareBody(t *testing.T, dbconf string) {
	heavyUID := testUser(t, "fluxfs-heavy")
	lightUID := testUser(t, "fluxfs-light")
	conf := t.TempDir()
	toml := `[archive]
period = "0.5s"

[job-manager]
plugins = [ { load = "mf-priority" } ]

[accounting.fairshare]
decay-half-life = "7d"

[accounting.priority]
age-weight = 0
`
	if dbconf != "" {
		toml += "\n[accounting]\n" + dbconf
	}
	if err := os.WriteFile(filepath.Join(conf, "fs.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1,
		Args: []string{"--config-path", conf, "-S", "statedir=" + t.TempDir()}})}
	if !canRunAsGuest(e) {
		t.Skip("the flux binary is not reachable by other users")
	}
	for _, args := range [][]string{
		{"add-bank", "root", "1"},
		{"add-bank", "--parent-bank=root", "physics", "1"},
		{"add-user", "--username=fluxfs-heavy", "--bank=physics"},
		{"add-user", "--username=fluxfs-light", "--bank=physics"},
	} {
		e.must(append([]string{"account"}, args...)...)
	}

	// the heavy user's usage, archived
	used := jobid.MustParse(e.mustAs(heavyUID, "submit", "-n2", "sleep", "1.5"))
	e.waitEvent(used, "clean")
	usage := e.must("account", "update-usage")
	if !strings.Contains(usage, "fluxfs-heavy") || !strings.Contains(usage, "fluxfs-light") {
		t.Fatalf("update-usage:\n%s", usage)
	}
	for _, line := range strings.Split(usage, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "fluxfs-light" && f[3] != "1.0000" {
			t.Errorf("the light user's fair-share is %s, want 1:\n%s", f[3], usage)
		}
		if len(f) == 4 && f[0] == "fluxfs-heavy" {
			if v, _ := strconv.ParseFloat(f[3], 64); v >= 0.5 {
				t.Errorf("the heavy user's fair-share is %s, want below 0.5:\n%s", f[3], usage)
			}
		}
	}

	// the instance is full: both users' new jobs wait
	blocker := jobid.MustParse(e.must("submit", "--exclusive", "-N1", "sleep", "300"))
	e.waitEvent(blocker, "start")
	heavy := jobid.MustParse(e.mustAs(heavyUID, "submit", "true"))
	light := jobid.MustParse(e.mustAs(lightUID, "submit", "true"))
	var ph, pl int64
	e.waitFor("both jobs prioritized", func() bool {
		ph, _ = strconv.ParseInt(e.field(heavy, "{priority}"), 10, 64)
		pl, _ = strconv.ParseInt(e.field(light, "{priority}"), 10, 64)
		return ph > 0 && pl > 0
	})
	if pl <= ph {
		t.Errorf("the light user's job has priority %d, the heavy user's %d: want light > heavy", pl, ph)
	}
	if pl != 100000 {
		t.Errorf("the light user's job has priority %d, want 100000 (fair-share 1 × weight 100000)", pl)
	}

	// why: the factors and their weights, for the job's user
	out := e.mustAs(lightUID, "job", "priority", "--explain", light.String())
	for _, want := range []string{"priority 100000", "FACTOR", "fairshare", "1.0000", "100000", "age", "size", "queue", "urgency", `bank "physics"`} {
		if !strings.Contains(out, want) {
			t.Errorf("flux job priority --explain lacks %q:\n%s", want, out)
		}
	}
	if r := e.asUser(lightUID, "job", "priority", "--explain", heavy.String()); r.Code == 0 {
		t.Errorf("the light user could see the heavy user's job's factors: %+v", r)
	}
	e.must("cancel", blocker.String())
}
