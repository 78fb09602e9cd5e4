package integration

import (
	"encoding/json"
	"os/user"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestAccountJobManagerReload: a limit kept in the accounting database
// (not the configuration) still holds after flux module reload
// job-manager: the accounting module sends the new job manager the
// database when it comes online (issue 25).
func TestAccountJobManagerReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	me, err := user.Current()
	if err != nil {
		t.Skipf("who runs the test: %v", err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1,
		Args: []string{"-S", "statedir=" + t.TempDir()}})}
	for _, args := range [][]string{
		{"add-bank", "root", "1"},
		{"add-bank", "--parent-bank=root", "physics", "1"},
		{"add-user", "--username=" + me.Username, "--bank=physics", "--max-running-jobs=1"},
	} {
		e.must(append([]string{"account"}, args...)...)
	}
	// the plugin's copy: how many associations it holds
	held := func() int {
		var q struct {
			Data struct {
				Database struct {
					Associations int `json:"associations"`
				} `json:"database"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(e.must("jobtap", "query", ".accounting-limits")), &q); err != nil {
			t.Fatalf("flux jobtap query .accounting-limits: %v", err)
		}
		return q.Data.Database.Associations
	}
	if n := held(); n != 1 {
		t.Fatalf("before the reload the job manager holds %d associations, want 1", n)
	}

	e.must("module", "reload", "job-manager")
	e.waitFor("the database sent to the reloaded job manager", func() bool { return held() == 1 })

	first := e.submit(testDuration("300s"), "true")
	e.waitEvent(first, "start")
	second := jobid.MustParse(e.must("submit", testDuration("0.01s"), "true"))
	e.waitFor("the second job held by max-running-jobs=1", func() bool {
		return e.field(second, "{status_abbrev} {dependencies}") == "D max-running-jobs-user-limit"
	})
	e.must("cancel", first.String())
	e.waitEvent(second, "clean")
}
