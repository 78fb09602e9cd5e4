package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

type webQueue struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Started bool   `json:"started"`
	Pending int    `json:"pending"`
	Running int    `json:"running"`
	Default bool   `json:"default"`
}

type webNode struct {
	Rank           uint     `json:"rank"`
	Hostname       string   `json:"hostname"`
	State          string   `json:"state"`
	Cores          int      `json:"cores"`
	CoresAllocated int      `json:"cores_allocated"`
	Jobs           []string `json:"jobs"`
}

type webResources struct {
	Nodes   []webNode      `json:"nodes"`
	Summary map[string]int `json:"summary"`
}

type webReservations struct {
	Reservations []struct {
		Name  string   `json:"name"`
		State string   `json:"state"`
		Ranks string   `json:"ranks"`
		Users []uint32 `json:"users"`
	} `json:"reservations"`
}

// TestWebAPI checks the routes flux-restful-api lacks against a real
// 4-broker instance: /v1/queues (counts of a running and a held job),
// /v1/resources (an allocated node with its job, a drained node, the
// summary), /v1/reservations (an active reservation), each as the owner
// and as a guest, who sees the nodes but not the owner's jobs on them;
// 401 without a token; /metrics's pending reasons, scheduler and broker
// figures.
func TestWebAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 4, Args: []string{"--config-path", conf}})}
	text := fmt.Sprintf("[reservations.maint]\nranks = \"3\"\nstart = %d\nduration = \"1h\"\nusers = [\"nobody\"]\n", time.Now().Unix()-60)
	if err := os.WriteFile(filepath.Join(conf, "resv.toml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("config", "reload")
	w := startWeb(e)
	tok := e.must("web", "token", "--expiry", "10m")

	for _, p := range []string{"/v1/queues", "/v1/resources", "/v1/reservations"} {
		if code := w.call("GET", p, "", nil); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", p, code)
		}
	}

	sleeper := e.submit("-n1", "--time-limit=1h", "sleep", "300")
	held := e.submit("--urgency=hold", "true")
	e.waitEvent(sleeper, "start")
	defer e.must("cancel", sleeper.String(), held.String())
	e.must("resource", "drain", "2", "web api test")

	var qs struct {
		Queues []webQueue `json:"queues"`
	}
	if code := w.call("GET", "/v1/queues", tok, &qs); code != 200 || len(qs.Queues) != 1 {
		t.Fatalf("queues: %d %+v", code, qs)
	}
	if q := qs.Queues[0]; q.Name != "" || !q.Enabled || !q.Started || q.Pending != 1 || q.Running != 1 || !q.Default {
		t.Errorf("anonymous queue %+v, want enabled, started, 1 pending, 1 running, default", q)
	}
	e.must("queue", "stop", "--nocheckpoint")
	if code := w.call("GET", "/v1/queues", tok, &qs); code != 200 || len(qs.Queues) != 1 || qs.Queues[0].Started {
		t.Errorf("stopped queue: %d %+v", code, qs)
	}
	e.must("queue", "start")

	var res webResources
	if code := w.call("GET", "/v1/resources", tok, &res); code != 200 || len(res.Nodes) != 4 {
		t.Fatalf("resources: %d %+v", code, res)
	}
	t.Logf("resources: %+v", res)
	holding := 0
	for _, n := range res.Nodes {
		if n.Hostname == "" || n.Cores == 0 {
			t.Errorf("node %+v has no hostname or cores", n)
		}
		if slices.Contains(n.Jobs, sleeper.String()) {
			holding++
			if n.State != "allocated" || n.CoresAllocated != 1 {
				t.Errorf("the sleeper's node %+v, want allocated with 1 core", n)
			}
		}
		if n.Rank == 2 && n.State != "drained" {
			t.Errorf("rank 2 is %q, want drained", n.State)
		}
	}
	if holding != 1 {
		t.Errorf("%d nodes list the sleeper %s, want 1", holding, sleeper)
	}
	if s := res.Summary; s["up"] != 4 || s["down"] != 0 || s["drained"] != 1 || s["allocated"] != 1 || s["idle"] != 2 {
		t.Errorf("summary %v, want up 4, down 0, drained 1, allocated 1, idle 2", s)
	}

	// metrics: the held job's reason, the scheduler's passes, the
	// broker's memory and its modules' messages
	resp, err := http.Get(w.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && !strings.HasPrefix(l, "#") {
			f, _ := strconv.ParseFloat(v, 64)
			metrics[k] = f
		}
	}
	for _, k := range []string{`flux_jobs_pending_reason{reason="held"}`, "flux_sched_passes_total", "flux_sched_pass_seconds_total",
		"flux_broker_max_rss_bytes", `flux_broker_cpu_seconds_total{mode="user"}`, `flux_module_messages_received_total{module="job-manager"}`,
		`flux_module_messages_sent_total{module="kvs"}`, `flux_jobs{queue="",state="run"}`} {
		if metrics[k] <= 0 {
			t.Errorf("/metrics: %s = %v, want > 0", k, metrics[k])
		}
	}
	if metrics[`flux_jobs_pending_reason{reason="held"}`] != 1 {
		t.Errorf("/metrics: %v held jobs, want 1", metrics[`flux_jobs_pending_reason{reason="held"}`])
	}
	t.Logf("scheduler: %v passes, %.6f s in all; broker max RSS %.0f MB", metrics["flux_sched_passes_total"],
		metrics["flux_sched_pass_seconds_total"], metrics["flux_broker_max_rss_bytes"]/1e6)

	var rv webReservations
	if code := w.call("GET", "/v1/reservations", tok, &rv); code != 200 || len(rv.Reservations) != 1 {
		t.Fatalf("reservations: %d %+v", code, rv)
	}
	if r := rv.Reservations[0]; r.Name != "maint" || r.State != "active" || r.Ranks != "3" || !slices.Equal(r.Users, []uint32{guestUID}) {
		t.Errorf("reservation %+v, want maint, active, ranks 3, users [%d]", r, guestUID)
	}

	t.Run("guest", func(t *testing.T) {
		e := e.sub(t)
		if !canRunAsGuest(e) {
			t.Skip("needs root to run a client as another user")
		}
		r := e.asGuest("web", "token")
		if r.Code != 0 {
			t.Fatalf("guest flux web token: %+v", r)
		}
		gtok := strings.TrimSpace(r.Stdout)
		w := &webServer{t: t, url: w.url}
		var res webResources
		if code := w.call("GET", "/v1/resources", gtok, &res); code != 200 || len(res.Nodes) != 4 {
			t.Fatalf("guest resources: %d %+v", code, res)
		}
		for _, n := range res.Nodes {
			if len(n.Jobs) != 0 {
				t.Errorf("the guest sees the owner's jobs on node %+v", n)
			}
		}
		if res.Summary["allocated"] != 1 {
			t.Errorf("guest summary %v, want the allocated node counted", res.Summary)
		}
		var qs struct {
			Queues []webQueue `json:"queues"`
		}
		if code := w.call("GET", "/v1/queues", gtok, &qs); code != 200 || len(qs.Queues) != 1 {
			t.Errorf("guest queues: %d %+v", code, qs)
		}
		var rv webReservations
		if code := w.call("GET", "/v1/reservations", gtok, &rv); code != 200 || len(rv.Reservations) != 1 {
			t.Errorf("guest reservations: %d %+v", code, rv)
		}
	})
}
