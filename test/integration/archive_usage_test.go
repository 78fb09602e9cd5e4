package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestJobArchiveAndUsage checks the job-archive module (loaded by an
// [archive] table) copies inactive jobs to SQLite with their results,
// keeps them across a restart without duplicates, and flux usage sums
// them by user and bank.
func TestJobArchiveAndUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	confdir, statedir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(confdir, "archive.toml"), []byte("[archive]\nperiod = \"0.5s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := testinstance.Options{Size: 2, Args: []string{"--config-path", confdir}, Attrs: map[string]string{"statedir": statedir}}
	e := &env{t: t, inst: testinstance.Start(t, o)}
	e.must("submit", "--wait", "--cc=1-3", "-B", "physics", testDuration("2s"), "true")
	e.must("submit", "--wait", "-N2", "-B", "chem", testDuration("1s"), "true")
	if r := e.flux("submit", "--wait", "sh", "-c", "exit 3"); r.Code != 3 {
		t.Fatalf("a job exiting 3: %+v", r)
	}
	held := e.submit("--urgency=hold", "true")
	e.must("cancel", held.String())
	e.waitEvent(held, "clean")
	jobs := e.must("usage", "--jobs", "-o", "csv")
	lines := strings.Split(jobs, "\n")
	if len(lines) != 7 {
		t.Fatalf("flux usage --jobs: want a header and 6 jobs:\n%s", jobs)
	}
	if !strings.Contains(jobs, ",FAILED,3,") || !strings.Contains(jobs, ",CANCELED,,") || strings.Count(jobs, ",physics,") != 3 {
		t.Errorf("archived jobs:\n%s", jobs)
	}
	var rows []struct {
		Group     map[string]string `json:"group"`
		Jobs      int               `json:"jobs"`
		NodeHours float64           `json:"node_hours"`
		CoreHours float64           `json:"core_hours"`
	}
	sum := e.must("usage", "--by=bank", "--per=total", "-o", "json")
	if err := json.Unmarshal([]byte(sum), &rows); err != nil {
		t.Fatalf("usage json: %v\n%s", err, sum)
	}
	byBank := map[string]float64{}
	for _, r := range rows {
		byBank[r.Group["bank"]] = r.NodeHours * 3600
	}
	// 3 one-node jobs of 2s, one two-node job of 1s (plus scheduling slack)
	if p := byBank["physics"]; p < 6 || p > 7.5 {
		t.Errorf("physics node-seconds %.2f, want ~6\n%s", p, sum)
	}
	if c := byBank["chem"]; c < 2 || c > 3 {
		t.Errorf("chem node-seconds %.2f, want ~2\n%s", c, sum)
	}
	var cluster []struct {
		Nodes int     `json:"nodes"`
		Alloc float64 `json:"allocated_pct"`
		Idle  float64 `json:"idle_pct"`
	}
	out := e.must("usage", "--cluster", "--per=total", "-o", "json")
	if err := json.Unmarshal([]byte(out), &cluster); err != nil || len(cluster) != 1 {
		t.Fatalf("usage --cluster: %v\n%s", err, out)
	}
	if c := cluster[0]; c.Nodes != 2 || c.Alloc <= 0 || c.Alloc+c.Idle > 100.01 {
		t.Errorf("cluster usage %+v", c)
	}
	if code := e.inst.Stop(); code != 0 {
		t.Fatalf("instance exited %d: %s", code, e.inst.Stderr())
	}
	// the same archive after a restart: the same 6 jobs, a new one added
	e = &env{t: t, inst: testinstance.Start(t, o)}
	e.must("submit", "--wait", "true")
	if got := strings.Count(e.must("usage", "--jobs", "-o", "csv"), "\n"); got != 7 {
		t.Errorf("after restart: %d jobs archived, want 7", got)
	}
	if canRunAsGuest(e) {
		// a guest reads their own jobs through the module (the file is
		// the owner's); the cluster report is the owner's
		if r := e.asGuest("submit", "--wait", "-B", "guestbank", "true"); r.Code != 0 {
			t.Fatalf("guest job: %+v", r)
		}
		e.waitFor("the guest's job archived", func() bool {
			r := e.asGuest("usage", "--jobs", "-o", "csv")
			return r.Code == 0 && strings.Count(r.Stdout, "\n") == 2
		})
		r := e.asGuest("usage", "--jobs", "-o", "csv")
		if !strings.Contains(r.Stdout, ",guestbank,") || strings.Contains(r.Stdout, "physics") {
			t.Errorf("guest's usage --jobs shows others' jobs or not theirs:\n%s", r.Stdout)
		}
		if r := e.asGuest("usage", "--cluster"); r.Code == 0 || !strings.Contains(r.Stderr, "is for the instance owner") {
			t.Errorf("guest's usage --cluster: %+v", r)
		}
		if got := strings.Count(e.must("usage", "--jobs", "-o", "csv"), "\n"); got != 8 {
			t.Errorf("owner sees %d jobs, want 8", got)
		}
	}
	db := filepath.Join(statedir, "job-archive.sqlite")
	if fi, err := os.Stat(db); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("archive file %s: %v %v, want mode 0600", db, fi.Mode(), err)
	}
	// offline, on the file
	if out := e.must("usage", "--db", db, "--by=user", "--per=day"); !strings.Contains(out, "NODE-HOURS") {
		t.Errorf("flux usage --db:\n%s", out)
	}
	e.fail("unknown field", "usage", "--by=color")
	e.fail("--per=year", "usage", "--per=year")
}

// TestArchiveJobUsage: the archive keeps a job's peak memory and CPU
// time from its cgroups (guest.usage), and flux usage --jobs shows them.
func TestArchiveJobUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	needCgroups(t, "memory")
	confdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(confdir, "archive.toml"), []byte("[archive]\nperiod = \"0.5s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := testinstance.Options{Size: 1, Args: []string{"--config-path", confdir}, Attrs: map[string]string{"statedir": t.TempDir()}}
	e := &env{t: t, inst: testinstance.Start(t, o)}
	e.must("run", "-n1", "dd", "if=/dev/zero", "of=/dev/null", "bs=32M", "count=8")
	csv := strings.Split(strings.TrimSpace(e.must("usage", "--jobs", "-o", "csv")), "\n")
	if len(csv) != 2 {
		t.Fatalf("flux usage --jobs: want a header and one job:\n%s", strings.Join(csv, "\n"))
	}
	head, row := strings.Split(csv[0], ","), strings.Split(csv[1], ",")
	col := map[string]string{}
	for i, h := range head {
		if i < len(row) {
			col[h] = row[i]
		}
	}
	mem, err := strconv.ParseInt(col["maxmem"], 10, 64)
	if err != nil || mem < 32<<20 {
		t.Errorf("maxmem %q of a task that used a 32M buffer (%v)", col["maxmem"], err)
	}
	if cpu, err := strconv.ParseFloat(col["cputime"], 64); err != nil || cpu <= 0 {
		t.Errorf("cputime %q (%v)", col["cputime"], err)
	}
	if table := e.must("usage", "--jobs"); !strings.Contains(table, "MAXMEM") || !strings.Contains(table, "M ") {
		t.Errorf("flux usage --jobs table:\n%s", table)
	}
}
