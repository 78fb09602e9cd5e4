package integration

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

type webUsage struct {
	Bins []struct {
		Start, End                      int64
		Nodes                           int
		Allocated, Down, Reserved, Idle float64
	} `json:"bins"`
	ByUser []struct {
		User      string  `json:"user"`
		NodeHours float64 `json:"node_hours"`
		Jobs      int     `json:"jobs"`
	} `json:"by_user"`
	ByBank  []map[string]any `json:"by_bank"`
	Message string           `json:"Message"`
}

// TestWebUsage checks GET /v1/usage against an instance with a job
// archive: hourly bins whose shares add up to 100 with some node time
// allocated, the owner's and a guest's jobs by user for the owner, only
// the guest's own for the guest; 400s naming the bad parameter or the
// limit.
func TestWebUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "archive.toml"), []byte("[archive]\nperiod = \"0.5s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2, Args: []string{"--config-path", conf},
		Attrs: map[string]string{"statedir": t.TempDir()}})}
	w := startWeb(e)
	tok := e.must("web", "token", "--expiry", "10m")
	e.must("submit", "--wait", "-N2", testDuration("2s"), "true")
	guest := canRunAsGuest(e)
	if guest {
		if r := e.asGuest("submit", "--wait", testDuration("1s"), "true"); r.Code != 0 {
			t.Fatalf("guest submit: %+v", r)
		}
	}
	now := time.Now().Unix()
	path := fmt.Sprintf("/v1/usage?since=%d&until=%d&bin=hour", now-7200, now+1)
	var u webUsage
	if code := w.call("GET", path, tok, &u); code != 200 || len(u.Bins) == 0 {
		t.Fatalf("usage: %d %+v", code, u)
	}
	t.Logf("owner: %+v", u)
	alloc := 0.0
	for _, b := range u.Bins {
		if s := b.Allocated + b.Down + b.Reserved + b.Idle; math.Abs(s-100) > 1e-6 || b.Nodes != 2 || b.End <= b.Start {
			t.Errorf("bin %+v adds up to %v", b, s)
		}
		alloc += b.Allocated
	}
	if alloc <= 0 {
		t.Errorf("no bin has node time allocated: %+v", u.Bins)
	}
	users := map[string]int{}
	for _, g := range u.ByUser {
		users[g.User] = g.Jobs
		if g.NodeHours <= 0 {
			t.Errorf("user %+v has no node hours", g)
		}
	}
	if users["root"] != 1 || (guest && users["nobody"] != 1) {
		t.Errorf("owner's by_user %+v, want root (and nobody) with 1 job each", u.ByUser)
	}

	for q, want := range map[string]string{
		"bin=week":                       "bin=",
		"since=abc":                      "since=",
		"since=2000&until=1000":          "must come after",
		"since=0&until=100000000":        "366 days",
		"since=0&until=8640000&bin=hour": "limit is 1000",
	} {
		var r webUsage
		if code := w.call("GET", "/v1/usage?"+q, tok, &r); code != 400 || !strings.Contains(r.Message, want) {
			t.Errorf("%s: %d %q, want 400 naming %q", q, code, r.Message, want)
		}
	}
	if code := w.call("GET", path, "", nil); code != 401 {
		t.Errorf("usage without a token: %d, want 401", code)
	}

	t.Run("guest", func(t *testing.T) {
		if !guest {
			t.Skip("needs root to run a client as another user")
		}
		e := e.sub(t)
		r := e.asGuest("web", "token")
		if r.Code != 0 {
			t.Fatalf("guest flux web token: %+v", r)
		}
		w := &webServer{t: t, url: w.url}
		var g webUsage
		if code := w.call("GET", path, strings.TrimSpace(r.Stdout), &g); code != 200 {
			t.Fatalf("guest usage: %d %+v", code, g)
		}
		if len(g.ByUser) != 1 || g.ByUser[0].User != "nobody" || g.ByUser[0].Jobs != 1 {
			t.Errorf("guest's by_user %+v, want only nobody's job", g.ByUser)
		}
		if len(g.Bins) != len(u.Bins) || g.Bins[0].Allocated != u.Bins[0].Allocated {
			t.Errorf("guest's bins %+v differ from the owner's %+v", g.Bins, u.Bins)
		}
	})
}
