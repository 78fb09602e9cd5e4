package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// transcriptJobs returns the jobs of the job-list.list response in
// testdata/wire/jobs.jsonl and the stdout flux jobs -a printed.
func transcriptJobs(t *testing.T) ([]jobRow, string) {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "wire")
	data, err := os.ReadFile(filepath.Join(dir, "jobs.jsonl"))
	if err != nil {
		t.Skipf("transcript: %v", err)
	}
	out, err := os.ReadFile(filepath.Join(dir, "jobs.stdout"))
	if err != nil {
		t.Skipf("transcript: %v", err)
	}
	var rows []jobRow
	for _, line := range strings.Split(string(data), "\n") {
		var rec struct {
			Dir     string          `json:"dir"`
			Topic   string          `json:"topic"`
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Topic != "job-list.list" || rec.Dir != "broker->client" || string(rec.Payload) == "null" {
			continue
		}
		err := job.DecodeJobs(rec.Payload, func(j *job.Info) { rows = append(rows, jobRow{Info: j, now: 1796013300}) })
		if err != nil {
			t.Fatal(err)
		}
	}
	stdout := strings.TrimSuffix(string(out), "rc=0\n")
	return rows, stdout
}

func formatRows(t *testing.T, format string, rows []jobRow, header bool) string {
	t.Helper()
	format, err := jobsFormatString(format)
	if err != nil {
		t.Fatal(err)
	}
	of, err := compileFormat(format, jobFieldSource)
	if err != nil {
		t.Fatal(err)
	}
	if err := of.prepare(rows); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if header {
		b.WriteString(of.header() + "\n")
	}
	for _, r := range rows {
		l, err := of.line(r)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

func TestJobsGoldenTranscript(t *testing.T) {
	rows, want := transcriptJobs(t)
	if got := formatRows(t, "default", rows, true); got != want {
		t.Fatalf("flux jobs -a output\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestJobsRequestAttrs(t *testing.T) {
	def, err := jobsFormatString("default")
	if err != nil {
		t.Fatal(err)
	}
	of, err := compileFormat(def, jobFieldSource)
	if err != nil {
		t.Fatal(err)
	}
	got := jobFieldsAttrs(of.fields)
	want := map[string]bool{"ntasks": true, "t_run": true, "annotations": true, "dependencies": true,
		"duration": true, "nnodes": true, "result": true, "t_cleanup": true, "priority": true,
		"urgency": true, "userid": true, "state": true, "nodelist": true, "name": true, "queue": true}
	if len(got) != len(want) {
		t.Fatalf("attrs %v", got)
	}
	for _, a := range got {
		if !want[a] {
			t.Fatalf("unexpected attr %s in %v", a, got)
		}
	}
	o := jobsOptions{all: true, now: time.Now()}
	c, _, err := jobsConstraint(&o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c)
	if !strings.Contains(string(b), `{"states":[126]}`) || !strings.Contains(string(b), `"userid"`) {
		t.Fatalf("constraint %s", b)
	}
}

func TestFormatSpecs(t *testing.T) {
	rows, _ := transcriptJobs(t)
	if len(rows) == 0 {
		t.Skip("no transcript")
	}
	cases := []struct{ format, want string }{
		{"{id}", "ƒ2PbTxYF"},
		{"{id.dec}", "52898562048"},
		{"{id.hex}", "0xc51000000"},
		{"{name:>8}|", "    true|"},
		{"{name:^8}|", "  true  |"},
		{"{name:.2+}", "t+"},
		{"{ntasks:<4}|", "1   |"},
		{"{ntasks:04}", "0001"},
		{"{runtime!H}", "0:00:01"},
		{"{runtime!F}", "0.028s"},
		{"{t_run}", "1796013269.4271228"},
		{"{t_depend!D:h}", "-"},
		{"{ranks:h}", "-"},
		{"{status}", "COMPLETED"},
		{"{result_abbrev}", "CD"},
		{"{state_single}", "I"},
		{"{annotations.sched.resource_summary}", "rank0/core0"},
		{"{sched.resource_summary}", "rank0/core0"},
		{"{annotations}", `{"sched": {"resource_summary": "rank0/core0"}}`},
		{"{user.nosuch}|", "|"},
		{"{inactive_reason}", "Exit "},
		{"{{literal}} {priority}", "{literal} 16"},
		{"a?:{queue}b", "b"},
		{"a?+:{queue}b", "b"},
		{"?+:{name:<2}|", "true|"},
		{"+:{name:<6}|", "true  |"},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			got := strings.TrimSuffix(formatRows(t, c.format, rows, false), "\n")
			if got != c.want {
				t.Fatalf("%s: got %q want %q", c.format, got, c.want)
			}
		})
	}
}

func TestFormatHeaders(t *testing.T) {
	rows, _ := transcriptJobs(t)
	of, err := compileFormat("{id.f58:>12} {t_submit!d:%b%d %R::>12} {sched.reason_pending:<10} {annotations.user.x}", jobFieldSource)
	if err != nil {
		t.Fatal(err)
	}
	of.prepare(rows)
	if got := of.header(); got != "       JOBID     T_SUBMIT REASON     USER.X" {
		t.Fatalf("header %q", got)
	}
	if _, err := compileFormat("{bogus}", jobFieldSource); err == nil {
		t.Fatal("unknown field accepted")
	}
}

func TestPyFormatting(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{{0, "0.0"}, {1.5, "1.5"}, {1e16, "1e+16"}, {0.00001, "1e-05"}, {123456789.25, "123456789.25"}} {
		if got := pyFloatStr(c.f); got != c.want {
			t.Errorf("pyFloatStr(%v) = %q want %q", c.f, got, c.want)
		}
	}
	for _, c := range []struct {
		f    float64
		want string
	}{{0, "0s"}, {0.0283, "0.028s"}, {12.5, "12.5s"}, {90, "1.5m"}, {7200, "2h"}, {172800, "2d"}} {
		if got := pyFSD(c.f); got != c.want {
			t.Errorf("pyFSD(%v) = %q want %q", c.f, got, c.want)
		}
	}
	if got := pyHMS(3725); got != "1:02:05" {
		t.Errorf("pyHMS: %q", got)
	}
	if got := pyHMS(90000); got != "1 day, 1:00:00" {
		t.Errorf("pyHMS: %q", got)
	}
}

func TestJobsJSON(t *testing.T) {
	rows, _ := transcriptJobs(t)
	if len(rows) == 0 {
		t.Skip()
	}
	b, _ := json.Marshal(jobJSON(rows[0]))
	for _, want := range []string{`"id":52898562048`, `"status":"COMPLETED"`, `"username":"root"`, `"exception":{"occurred":false}`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Fatalf("json %s lacks %s", b, want)
		}
	}
}

// TestPyJSONDumps: annotations print as Python's json.dumps would.
func TestPyJSONDumps(t *testing.T) {
	for in, want := range map[string]string{
		`{"sched":{"t_estimate":1.5,"reason_pending":"insufficient resources"},"user":{"x":[1,2]}}`: `{"sched": {"t_estimate": 1.5, "reason_pending": "insufficient resources"}, "user": {"x": [1, 2]}}`,
		`{"a":"é😀","b":"q\"\n"}`: `{"a": "\u00e9\ud83d\ude00", "b": "q\"\n"}`,
		`[true, null ,  3]`:      `[true, null, 3]`,
		// python3 -c 'import json; print(json.dumps(...))'
		`{"a":"a<b>&\u007f","c":"\u0001\b"}`: `{"a": "a<b>&\u007f", "c": "\u0001\b"}`,
		`{"a":`:                              `{"a":`,
	} {
		if got := pyJSONDumps([]byte(in)); got != want {
			t.Errorf("pyJSONDumps(%s) = %s, want %s", in, got, want)
		}
	}
}
