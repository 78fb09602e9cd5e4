package cli

import (
	"strings"
	"testing"
)

// TestEachPoolJobspec: flux pool submit's jobs one at a time: --bcc
// without {cc} gives one jobspec shared by every ID, --bcc with {cc} in
// the command and --cc (FLUX_JOB_CC) one of their own each.
func TestEachPoolJobspec(t *testing.T) {
	collect := func(cc, bcc string, args ...string) [][]byte {
		o := &submitOptions{cmdName: "pool submit", proc: defaultProcessEnv(), urgency: "16", cc: cc, bcc: bcc}
		var out [][]byte
		if err := eachPoolJobspec(o, args, func(b []byte) error { out = append(out, b); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := collect("", "1-5", "true")
	if len(same) != 5 {
		t.Fatalf("--bcc=1-5: %d jobspecs", len(same))
	}
	for _, b := range same[1:] {
		if &b[0] != &same[0][0] {
			t.Fatal("--bcc without {cc}: jobspecs not shared")
		}
	}
	sub := collect("", "1-3", "echo", "{cc}")
	for i, want := range []string{`"echo","1"`, `"echo","2"`, `"echo","3"`} {
		if !strings.Contains(string(sub[i]), want) {
			t.Errorf("--bcc with {cc}: jobspec %d: %s", i, sub[i])
		}
	}
	cc := collect("1-3", "", "true")
	for i, want := range []string{`"FLUX_JOB_CC":"1"`, `"FLUX_JOB_CC":"2"`, `"FLUX_JOB_CC":"3"`} {
		if !strings.Contains(string(cc[i]), want) {
			t.Errorf("--cc: jobspec %d lacks %s", i, want)
		}
	}
	if one := collect("", "", "true"); len(one) != 1 {
		t.Errorf("no --cc: %d jobspecs", len(one))
	}
}

// TestSubmitCache: a puller encodes a run of identical pulled jobspecs
// once; a different one gets its own request, and a bad one an error.
func TestSubmitCache(t *testing.T) {
	o := &submitOptions{cmdName: "pool submit", proc: defaultProcessEnv(), urgency: "16"}
	var specs [][]byte
	for _, arg := range []string{"a", "b"} {
		if err := eachPoolJobspec(o, []string{"echo", arg}, func(b []byte) error { specs = append(specs, b); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var c submitCache
	p1, err := c.get(specs[0], 1000)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := c.get(append([]byte(nil), specs[0]...), 1000)
	if &p1[0] != &p2[0] {
		t.Error("an identical jobspec was encoded again")
	}
	p3, err := c.get(specs[1], 1000)
	if err != nil || string(p3) == string(p1) || !strings.Contains(string(p3), `"urgency":16`) {
		t.Errorf("another jobspec: %s, %v", p3, err)
	}
	if _, err := c.get([]byte(`{"version":1}`), 1000); err == nil {
		t.Error("a bad jobspec was encoded")
	}
}

// TestDefaultWindow: four pulled jobs a core, 8 at least and maxWindow
// at most, however many cores the child has.
func TestDefaultWindow(t *testing.T) {
	for cores, want := range map[int]int{1: 8, 2: 8, 16: 64, 256: maxWindow, 16384: maxWindow} {
		if got := defaultWindow(cores); got != want {
			t.Errorf("defaultWindow(%d) = %d, want %d", cores, got, want)
		}
	}
}
