package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/accounting"
)

// view-user and list-users show each association's shares, usage and
// fair-share (flux-accounting's shares, job_usage and fairshare), "-"
// before a fair-share pass has seen it.
func TestListAssociationsFairShare(t *testing.T) {
	usage, fs := 12.345, 0.625
	as := []accounting.Association{
		{Username: "alice", Userid: 1001, Bank: "physics", DefaultBank: "physics", Shares: 3, Active: true, JobUsage: &usage, FairShare: &fs},
		{Username: "bob", Userid: 1002, Bank: "chem", DefaultBank: "chem", Shares: 1, Active: true},
	}
	var b bytes.Buffer
	if err := listAssociations(&b, as); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	head := strings.Fields(lines[0])
	col := func(line, name string) string {
		for i, h := range head {
			if h == name {
				return strings.Fields(line)[i]
			}
		}
		t.Fatalf("no column %s in %q", name, lines[0])
		return ""
	}
	for _, c := range []struct{ line, col, want string }{
		{lines[1], "SHARES", "3"}, {lines[1], "JOB_USAGE", "12.3450"}, {lines[1], "FAIRSHARE", "0.6250"},
		{lines[2], "SHARES", "1"}, {lines[2], "JOB_USAGE", "-"}, {lines[2], "FAIRSHARE", "-"},
	} {
		if got := col(c.line, c.col); got != c.want {
			t.Errorf("%s of %q = %q, want %q", c.col, c.line, got, c.want)
		}
	}
	b.Reset()
	printBankTree(&b, "physics", accounting.BanksResponse{Banks: []accounting.Bank{{Name: "physics", Shares: 1, Active: true}}, Associations: as[:1]})
	if !strings.Contains(b.String(), "JOB_USAGE") || !strings.Contains(b.String(), "0.6250") {
		t.Errorf("view-bank --tree --users:\n%s", b.String())
	}
}
