package cli

import (
	"strings"
	"testing"
)

// TestCapacitorLineCache: identical lines share one parse (and so one
// encoded request); a different line, a comment and a bad line do not,
// and a bad line repeated is reported at each of its line numbers.
func TestCapacitorLineCache(t *testing.T) {
	in := strings.Join([]string{
		"-n1 true",
		"-n1 true",
		"# comment",
		"-n2 hostname",
		"--bogus x",
		"-n1 true",
		"--bogus x",
	}, "\n") + "\n"
	out := make(chan *capacitorJob, 16)
	go readCapacitorLines(strings.NewReader(in), out)
	var jobs []*capacitorJob
	for j := range out {
		jobs = append(jobs, j)
	}
	if len(jobs) != 6 {
		t.Fatalf("got %d jobs, want 6", len(jobs))
	}
	lines := []int{1, 2, 4, 5, 6, 7}
	for i, j := range jobs {
		if j.line != lines[i] {
			t.Errorf("job %d: line %d, want %d", i, j.line, lines[i])
		}
	}
	if jobs[0].capacitorLine != jobs[1].capacitorLine || jobs[0].capacitorLine != jobs[4].capacitorLine {
		t.Error("identical lines were parsed again")
	}
	if jobs[2].capacitorLine == jobs[0].capacitorLine || jobs[2].err != nil {
		t.Errorf("-n2 hostname: shared %v, err %v", jobs[2].capacitorLine == jobs[0].capacitorLine, jobs[2].err)
	}
	if jobs[3].err == nil || jobs[5].err == nil || !strings.Contains(jobs[3].err.Error(), "bogus") {
		t.Errorf("bad lines: %v, %v", jobs[3].err, jobs[5].err)
	}
	p1, err := jobs[0].submitPayload(1000)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := jobs[1].submitPayload(1000)
	if string(p1) != string(p2) || !strings.Contains(string(p1), `"urgency":16`) {
		t.Errorf("payloads %s / %s", p1, p2)
	}
}

// TestCapacitorLineCacheBounded: past capacitorCache distinct lines the
// cache starts again and every line still makes its job.
func TestCapacitorLineCacheBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 3*capacitorCache; i++ {
		b.WriteString("-n1 --job-name=j" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + " true\n")
	}
	out := make(chan *capacitorJob, 16)
	go readCapacitorLines(strings.NewReader(b.String()), out)
	n := 0
	for j := range out {
		if j.err != nil {
			t.Fatalf("line %d: %v", j.line, j.err)
		}
		n++
	}
	if n != 3*capacitorCache {
		t.Fatalf("%d jobs, want %d", n, 3*capacitorCache)
	}
}
