package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func TestLocalURI(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "local")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"local:///x/y", "local:///x/y", nil},
		{"ssh://somehost" + sock, "local://" + sock, nil},
		{"ssh://somehost/no/such/dir/local", "", errRemoteURI},
		{sock, "local://" + sock, nil},
		{"tcp://1.2.3.4:5", "", nil},
	} {
		got, err := localURI(tc.in)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("localURI(%q) error %v, want %v", tc.in, err, tc.err)
		case tc.want == "" && err == nil:
			t.Errorf("localURI(%q) = %q, want an error", tc.in, got)
		case tc.want != "" && got != tc.want:
			t.Errorf("localURI(%q) = %q (%v), want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestIsInstanceJobspec(t *testing.T) {
	spec := func(cmd ...string) string {
		b, _ := json.Marshal(map[string]any{
			"version":    1,
			"resources":  []any{map[string]any{"type": "slot", "count": 1, "label": "task", "with": []any{map[string]any{"type": "core", "count": 1}}}},
			"tasks":      []any{map[string]any{"command": cmd, "slot": "task", "count": map[string]any{"per_slot": 1}}},
			"attributes": map[string]any{"system": map[string]any{"duration": 0}},
		})
		return string(b)
	}
	if !isInstanceJobspec(spec("/usr/bin/flux", "broker", "--", "sh")) {
		t.Error("flux broker is an instance")
	}
	if !isInstanceJobspec(spec("flux", "start")) {
		t.Error("flux start is an instance")
	}
	if isInstanceJobspec(spec("sleep", "10")) || isInstanceJobspec(spec("flux", "run", "x")) || isInstanceJobspec("{") {
		t.Error("not instances")
	}
}

func TestShellJoin(t *testing.T) {
	if got := shellJoin([]string{"echo", "a b", "it's", "x=1"}); got != `echo 'a b' 'it'\''s' x=1` {
		t.Fatalf("%s", got)
	}
}

func TestBatchOptionsDirectivesAndCommandLine(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n# flux: -N2 --job-name=fromdirective\n# flux: -t 5\necho hi\n"), 0o755)
	o, body, args, name, err := parseBatchOptions([]string{"--job-name=cmdline", script, "a1", "--flag"}, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != "2" || o.jobName != "cmdline" || o.timeLimit != "5" {
		t.Fatalf("nodes %q name %q time %q", o.nodes, o.jobName, o.timeLimit)
	}
	if name != "job.sh" || !strings.HasPrefix(body, "#!/bin/sh") || strings.Join(args, " ") != "a1 --flag" {
		t.Fatalf("name %q args %q", name, args)
	}
	// stdin, --wrap
	o, body, _, _, err = parseBatchOptions([]string{"--wrap", "-n2"}, strings.NewReader("hostname\n"))
	if err != nil || o.ntasks != "2" || body != "#!/bin/sh\nhostname\n" {
		t.Fatalf("wrap: %v %q %q", err, o.ntasks, body)
	}
	// a script without #!
	if _, _, _, _, err := parseBatchOptions(nil, strings.NewReader("hostname\n")); err == nil {
		t.Fatal("a script without #! was accepted")
	}
	// a positional directive
	os.WriteFile(script, []byte("#!/bin/sh\n# flux: hostname\n"), 0o755)
	if _, _, _, _, err := parseBatchOptions([]string{script}, nil); !errors.Is(err, ErrDirective) {
		t.Fatalf("positional directive: %v", err)
	}
}

func TestInstanceJobspec(t *testing.T) {
	o := newInstanceOptions("batch")
	fs := instanceFlags("batch", o, true)
	if err := fs.Parse([]string{"-N2", "-c2", "-B", "-Sfoo=bar", "--output=out.{{id}}"}); err != nil {
		t.Fatal(err)
	}
	o.proc.getwd = func() (string, error) { return "/work/dir", nil }
	o.errorPath = o.output
	js, err := instanceJobspec(o, []string{"/bin/flux", "batch-exec", "x"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := js.Tasks[0].Command
	if cmd[1] != "broker" || cmd[2] != "-Sfoo=bar" || cmd[3] != "--" || cmd[5] != "batch-exec" {
		t.Fatalf("command %q", cmd)
	}
	opts := js.ShellOptions()
	pr, _ := opts["per-resource"].(map[string]any)
	if pr["type"] != "node" || opts["exit-timeout"] != "none" {
		t.Fatalf("shell options %v", opts)
	}
	out, _ := opts["output"].(map[string]any)
	stdout, _ := out["stdout"].(map[string]any)
	stderr, _ := out["stderr"].(map[string]any)
	if stdout["path"] != "/work/dir/out.{{id}}" || stderr["path"] != "/work/dir/out.{{id}}" {
		t.Fatalf("output %v", out)
	}
	if js.NNodes() != 2 {
		t.Fatalf("nodes %d", js.NNodes())
	}
	// neither -n nor -N
	if _, err := instanceJobspec(newInstanceOptions("alloc"), nil); err == nil {
		t.Fatal("an instance without a slot count was accepted")
	}
}

func TestPstreeRender(t *testing.T) {
	mk := func(id uint64, name string, instance bool, kids ...*pstreeNode) *pstreeNode {
		return &pstreeNode{row: &jobRow{Info: &job.Info{ID: jobid.ID(id), Name: name}}, instance: instance, children: kids, count: 1}
	}
	root := &pstreeNode{instance: true, children: []*pstreeNode{
		mk(1, "flux", true, mk(2, "sleep", false), mk(3, "sleep", false), mk(4, "flux", true, mk(5, "hostname", false))),
		mk(6, "sleep", false),
	}}
	lf, _ := compileFormat("{name}", jobFieldSource)
	w := &pstreeWalk{}
	got := strings.Join(w.render(root, lf, lf, nil, false, true), "\n")
	want := strings.Join([]string{
		".",
		"├── flux",
		"│   ├── 2*[sleep]",
		"│   └── flux",
		"│       └── hostname",
		"└── sleep",
	}, "\n")
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	w.o.ascii = true
	got = strings.Join(w.render(&pstreeNode{instance: true, children: []*pstreeNode{mk(1, "a", false), mk(2, "b", false)}}, lf, lf, nil, true, true), "\n")
	if got != "a\nb" {
		t.Fatalf("skip root:\n%s", got)
	}
}
