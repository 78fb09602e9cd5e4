package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestJobsOutput checks flux jobs against flux-jobs(1): default listing
// (active jobs only, fixed header), -a, -n, -o, --json, --filter, -c,
// --name, --stats.
func TestJobsOutput(t *testing.T) {
	e := start(t)
	ok := e.submit("--job-name=ok", "-n2", testDuration("0.01s"), "true")
	bad := e.submit(testDuration("0.01s"), failing, "false")
	ca := e.submit("--urgency=hold", "true")
	e.must("cancel", ca.String())
	run := e.submit(testDuration("60s"), "sleep")
	held := e.submit("--urgency=hold", "true")
	dep := e.submit("--dependency=afterany:"+held.String(), "true")
	for _, id := range []jobid.ID{ok, bad, ca} {
		e.waitEvent(id, "clean")
	}
	e.waitEvent(run, "start")
	e.waitEvent(dep, "dependency-add")

	const header = "       JOBID USER     NAME       ST NTASKS NNODES     TIME INFO"
	rows := func(out string) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(l); len(f) > 0 {
				m[f[0]] = l
			}
		}
		return m
	}

	t.Run("default", func(t *testing.T) {
		e := e.sub(t)
		out := strings.TrimRight(e.flux("jobs").Stdout, "\n")
		if first := strings.Split(out, "\n")[0]; first != header {
			t.Fatalf("header %q", first)
		}
		r := rows(out)
		if len(r) != 3 {
			t.Fatalf("flux jobs lists %d jobs, want the 3 active ones:\n%s", len(r), out)
		}
		checks := map[jobid.ID]*regexp.Regexp{
			run:  regexp.MustCompile(`^ +ƒ\w+ \S+ +sleep +R +1 +1 +\S+s \S+$`),
			held: regexp.MustCompile(`^ +ƒ\w+ \S+ +true +S +1 +- +- held$`),
			dep:  regexp.MustCompile(`^ +ƒ\w+ \S+ +true +D +1 +- +- depends:after-finish=` + held.String() + `$`),
		}
		for id, re := range checks {
			if !re.MatchString(r[id.String()]) {
				t.Errorf("row of %s: %q, want %s", id, r[id.String()], re)
			}
		}
		if n := e.must("jobs", "-n"); strings.Contains(n, "JOBID") || len(strings.Split(n, "\n")) != 3 {
			t.Errorf("flux jobs -n:\n%s", n)
		}
	})

	t.Run("all", func(t *testing.T) {
		e := e.sub(t)
		r := rows(e.flux("jobs", "-a").Stdout)
		if len(r) != 6 {
			t.Fatalf("flux jobs -a lists %d jobs, want 6", len(r))
		}
		for id, st := range map[jobid.ID]string{ok: " CD ", bad: "  F ", ca: " CA "} {
			if !strings.Contains(r[id.String()], st) {
				t.Errorf("row of %s: %q, want status %q", id, r[id.String()], st)
			}
		}
		if !regexp.MustCompile(` ok +CD +2 +1 +\S+s \S+$`).MatchString(r[ok.String()]) {
			t.Errorf("completed job row %q", r[ok.String()])
		}
	})

	t.Run("format", func(t *testing.T) {
		e := e.sub(t)
		got := e.must("jobs", "-a", "-n", "-o", "{id.f58} {name} {ntasks} {state} {result} {returncode}", ok.String(), bad.String(), ca.String())
		want := []string{
			ca.String() + " true 1 INACTIVE CANCELED -128",
			bad.String() + " false 1 INACTIVE FAILED 1",
			ok.String() + " ok 2 INACTIVE COMPLETED 0",
		}
		gotLines := strings.Split(got, "\n")
		sort.Strings(gotLines)
		sort.Strings(want)
		if strings.Join(gotLines, "\n") != strings.Join(want, "\n") {
			t.Errorf("flux jobs -o:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
		}
		// a format without -n has a header naming the fields
		if h := strings.Split(e.must("jobs", "-o", "{id.f58} {name}"), "\n")[0]; h != "JOBID NAME" {
			t.Errorf("-o header %q", h)
		}
		// {id} is shown in F58, like flux-core's JobID
		if got := e.must("jobs", "-n", "-o", "{id}|{id.dec}|{id.hex}", ok.String()); got != fmt.Sprintf("%s|%d|%#x", ok, uint64(ok), uint64(ok)) {
			t.Errorf("{id}|{id.dec}|{id.hex}: %q", got)
		}
	})

	t.Run("filter", func(t *testing.T) {
		e := e.sub(t)
		for filter, want := range map[string][]jobid.ID{
			"failed":          {bad},
			"canceled":        {ca},
			"completed":       {ok},
			"failed,canceled": {ca, bad},
			"running":         {run},
			"pending":         {held, dep},
			"depend":          {dep},
			"sched":           {held},
		} {
			got := strings.Fields(e.must("jobs", "-n", "-f", filter, "-o", "{id.f58}"))
			var ws []string
			for _, id := range want {
				ws = append(ws, id.String())
			}
			sort.Strings(got)
			sort.Strings(ws)
			if strings.Join(got, " ") != strings.Join(ws, " ") {
				t.Errorf("flux jobs -f %s: %v, want %v", filter, got, ws)
			}
		}
		if got := e.must("jobs", "-a", "-n", "--name=ok", "-o", "{id.f58}"); got != ok.String() {
			t.Errorf("--name=ok: %q", got)
		}
		if got := strings.Split(e.must("jobs", "-a", "-n", "-c", "2", "-o", "{id.f58}"), "\n"); len(got) != 2 {
			t.Errorf("-c 2 lists %d jobs", len(got))
		}
	})

	t.Run("json", func(t *testing.T) {
		e := e.sub(t)
		var one map[string]any
		if err := json.Unmarshal([]byte(e.must("jobs", "--json", ok.String())), &one); err != nil {
			t.Fatalf("flux jobs --json ID: %v", err)
		}
		if one["id"] != float64(ok) || one["result"] != "COMPLETED" || one["name"] != "ok" || one["ntasks"] != 2.0 {
			t.Errorf("flux jobs --json ID: %v", one)
		}
		var all struct {
			Jobs []map[string]any `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(e.must("jobs", "--json", "-a")), &all); err != nil {
			t.Fatalf("flux jobs --json -a: %v", err)
		}
		if len(all.Jobs) != 6 {
			t.Fatalf("flux jobs --json -a: %d jobs", len(all.Jobs))
		}
		for _, j := range all.Jobs {
			// only attributes available now appear (flux-jobs(1))
			if j["state"] == "SCHED" {
				if _, has := j["result"]; has {
					t.Errorf("pending job has a result: %v", j)
				}
			}
		}
	})

	t.Run("stats", func(t *testing.T) {
		e := e.sub(t)
		r := e.flux("jobs", "--stats-only")
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != "1 running, 1 completed, 2 failed, 2 pending, 0 inactive purged" {
			t.Errorf("flux jobs --stats-only with active jobs: %+v", r)
		}
	})
	e.must("cancel", "--all")

	// --color: a line's color says how the job ended (flux-core's codes;
	// the reset follows the newline)
	colored := e.must("jobs", "--color=always", "-n", "-o", "{id.f58}", ok.String(), bad.String(), ca.String())
	for id, code := range map[jobid.ID]string{ok: "\033[01;32m", bad: "\033[01;31m", ca: "\033[37m"} {
		if !strings.Contains(colored, code+id.String()+"\n\033[0;0m") {
			t.Errorf("--color: %s not colored %q: %q", id, code, colored)
		}
	}
	if plain := e.must("jobs", "--color=never", "-n", "-o", "{id.f58}", ok.String()); strings.Contains(plain, "\033") {
		t.Errorf("--color=never: %q", plain)
	}
}
