package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestAccountUsageReport: real users' jobs, archived, are written to the
// usage history by the fair-share pass (the same rows when it runs
// again), and flux account view-usage-report shows them: the owner and
// an operator every association, a user only their own (issue 25).
func TestAccountUsageReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	accountUsageBody(t, "")
}

// accountUsageBody is TestAccountUsageReport's body; dbconf is the
// [accounting] lines that name a PostgreSQL database ("": the SQLite
// file in the statedir; TestAccountPostgres runs it with one).
func accountUsageBody(t *testing.T, dbconf string) {
	aUID := testUser(t, "fluxusage-a")
	bUID := testUser(t, "fluxusage-b")
	opUID := testUser(t, "fluxusage-op")
	conf := t.TempDir()
	toml := "[access]\noperators = [\"fluxusage-op\"]\n\n[archive]\nperiod = \"0.5s\"\n"
	if dbconf != "" {
		toml += "\n[accounting]\n" + dbconf
	}
	if err := os.WriteFile(filepath.Join(conf, "usage.toml"), []byte(toml), 0o644); err != nil {
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
		{"add-bank", "--parent-bank=root", "chem", "1"},
		{"add-user", "--username=fluxusage-a", "--bank=physics"},
		{"add-user", "--username=fluxusage-b", "--bank=chem"},
	} {
		e.must(append([]string{"account"}, args...)...)
	}
	ja := jobid.MustParse(e.mustAs(aUID, "submit", "-n2", "sleep", "3"))
	jb := jobid.MustParse(e.mustAs(bUID, "submit", "true"))
	e.waitEvent(ja, "clean")
	e.waitEvent(jb, "clean")

	report := func(uid uint32, args ...string) []accounting.UsagePeriod {
		t.Helper()
		var ps []accounting.UsagePeriod
		out := e.mustAs(uid, append([]string{"account", "view-usage-report", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &ps); err != nil {
			t.Fatalf("view-usage-report --json: %v\n%s", err, out)
		}
		return ps
	}
	// the archive catches up on its own period: a pass until both jobs
	// are in the history
	var first []accounting.UsagePeriod
	e.waitFor("both jobs in the usage history", func() bool {
		e.must("account", "update-usage")
		first = report(0)
		return len(first) == 2
	})
	t.Logf("usage history: %+v", first)
	for i, want := range []struct{ user, bank string }{{"fluxusage-a", "physics"}, {"fluxusage-b", "chem"}} {
		if p := first[i]; p.Username != want.user || p.Bank != want.bank || p.Jobs != 1 {
			t.Errorf("row %d: %+v, want %s in %s with 1 job", i, p, want.user, want.bank)
		}
	}
	// two tasks that slept 3 seconds: at least 6 core-seconds
	if cs := first[0].CoreHours * 3600; cs < 6 {
		t.Errorf("fluxusage-a's core time: %.3f core-seconds, want at least 6", cs)
	}
	// a pass again writes the same rows
	e.must("account", "update-usage")
	if again := report(0); len(again) != 2 || again[0] != first[0] || again[1] != first[1] {
		t.Errorf("after another pass: %+v, want %+v", again, first)
	}

	// the table: bank:user rows and a total, in core-seconds
	out := e.must("account", "view-usage-report", "-t", "sec")
	for _, want := range []string{"bankuser(coresec)", "physics:fluxusage-a", "chem:fluxusage-b", "TOTAL"} {
		if !strings.Contains(out, want) {
			t.Errorf("view-usage-report -t sec lacks %q:\n%s", want, out)
		}
	}
	t.Logf("view-usage-report -t sec:\n%s", out)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "TOTAL" {
			if f[1] != "2" {
				t.Errorf("TOTAL jobs %s, want 2:\n%s", f[1], out)
			}
			if v, _ := strconv.ParseFloat(f[2], 64); v < 6 {
				t.Errorf("TOTAL core-seconds %s, want at least 6:\n%s", f[2], out)
			}
		}
	}
	if banks := e.must("account", "view-usage-report", "-r", "bybank", "--daily", "-s", "-2d"); !strings.Contains(banks, "physics") || !strings.Contains(banks, "chem") {
		t.Errorf("view-usage-report -r bybank --daily:\n%s", banks)
	}
	if ps := report(0, "-b", "chem"); len(ps) != 1 || ps[0].Username != "fluxusage-b" {
		t.Errorf("-b chem: %+v", ps)
	}
	if ps := report(0, "-e", "2000-01-01"); len(ps) != 0 {
		t.Errorf("before 2000: %+v", ps)
	}

	// a user sees their own; an operator everyone's
	if ps := report(aUID); len(ps) != 1 || ps[0].Username != "fluxusage-a" {
		t.Errorf("fluxusage-a's report: %+v", ps)
	}
	e.refusedAs(aUID, "only the instance owner and operators may see other users' usage", "account", "view-usage-report", "-u", "fluxusage-b")
	if ps := report(opUID); len(ps) != 2 {
		t.Errorf("the operator's report: %+v", ps)
	}

	// fair-share where users look: view-user's columns, flux jobs {fairshare}
	view := e.mustAs(aUID, "account", "view-user", "fluxusage-a")
	lines := strings.Split(view, "\n")
	if len(lines) != 2 {
		t.Fatalf("view-user fluxusage-a:\n%s", view)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	cols := map[string]string{}
	for i, h := range head {
		if i < len(row) {
			cols[h] = row[i]
		}
	}
	if cols["SHARES"] != "1" || cols["JOB_USAGE"] == "" || cols["JOB_USAGE"] == "-" || cols["FAIRSHARE"] == "" || cols["FAIRSHARE"] == "-" {
		t.Errorf("view-user fluxusage-a lacks shares, usage or fair-share:\n%s", view)
	}
	// a used more than b in a sibling bank of the same shares: a's
	// fair-share is below b's
	fsOf := func(uid uint32, id jobid.ID) float64 {
		t.Helper()
		out := e.mustAs(uid, "jobs", "-n", "-o", "{fairshare:.4f}", id.String())
		v, err := strconv.ParseFloat(out, 64)
		if err != nil {
			t.Fatalf("flux jobs -o {fairshare} %s as uid %d: %q", id, uid, out)
		}
		return v
	}
	fa, fb := fsOf(aUID, ja), fsOf(bUID, jb)
	t.Logf("fair-share: fluxusage-a %.4f, fluxusage-b %.4f", fa, fb)
	if fa >= fb {
		t.Errorf("fluxusage-a's fair-share %.4f is not below fluxusage-b's %.4f", fa, fb)
	}
	if v := fmt.Sprintf("%.4f", fa); v != cols["FAIRSHARE"] {
		t.Errorf("flux jobs {fairshare} %s, view-user FAIRSHARE %s", v, cols["FAIRSHARE"])
	}
	if out := e.must("jobs", "-a", "-A", "-o", "{username} {fairshare:.4f}"); !strings.Contains(out, "fluxusage-b") || strings.Contains(out, "fluxusage-b \n") {
		t.Errorf("the owner's flux jobs -A {fairshare}:\n%s", out)
	}
	if h := e.must("jobs", "-a", "-o", "{fairshare}"); !strings.HasPrefix(h, "FAIRSHARE") {
		t.Errorf("flux jobs {fairshare} heading: %q", h)
	}

	e.fail(`--start="someday"`, "account", "view-usage-report", "-s", "someday")
	e.fail("at most 366", "account", "view-usage-report", "--daily", "-s", "2000-01-01")
}
