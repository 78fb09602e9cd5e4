package jobspec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// checkRoundTrip encodes js, parses the result and checks it is equal.
func checkRoundTrip(t *testing.T, js *Jobspec) {
	t.Helper()
	b, err := js.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	js2, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(MarshalJSON()) = %v\n%s", err, b)
	}
	if !reflect.DeepEqual(js, js2) {
		b2, _ := js2.MarshalJSON()
		t.Fatalf("round trip changed the jobspec:\n%s\n%s", b, b2)
	}
}

func mustBuild(t *testing.T) *Jobspec {
	t.Helper()
	js, err := FromCommand([]string{"app"}, CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func mustJSON(t *testing.T, js *Jobspec) string {
	t.Helper()
	b, err := js.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const v1YAML = `
version: 1
resources:
  - type: node
    count: 2
    exclusive: true
    with:
      - type: slot
        count: 2
        label: task
        with:
          - type: core
            count: 4
          - type: gpu
            count: 1
tasks:
  - command: ["app", "--flag"]
    slot: task
    count:
      per_slot: 1
attributes:
  system:
    duration: 3600.
    cwd: /home/flux
    queue: batch
    environment:
      HOME: /home/flux
      UNSET: null
    job:
      name: myjob
    shell:
      options:
        cpu-affinity: per-task
    constraints: {properties: [ssd]}
    dependencies:
      - scheme: afterok
        value: "ƒ2oLkTLb"
  user:
    study: 7
`

func TestParseYAMLAndJSONAgree(t *testing.T) {
	y, err := ParseV1([]byte(v1YAML))
	if err != nil {
		t.Fatal(err)
	}
	b := mustJSON(t, y)
	j, err := ParseV1([]byte(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(y, j) {
		t.Fatalf("YAML and JSON parse differ:\n%s\n%s", b, mustJSON(t, j))
	}
	want := `{"resources":[{"type":"node","count":2,"exclusive":true,"with":[{"type":"slot","count":2,` +
		`"with":[{"type":"core","count":4},{"type":"gpu","count":1}],"label":"task"}]}],` +
		`"tasks":[{"command":["app","--flag"],"slot":"task","count":{"per_slot":1}}],` +
		`"attributes":{"system":{"constraints":{"properties":["ssd"]},"cwd":"/home/flux",` +
		`"dependencies":[{"scheme":"afterok","value":"ƒ2oLkTLb"}],"duration":3600.0,` +
		`"environment":{"HOME":"/home/flux","UNSET":null},"job":{"name":"myjob"},` +
		`"queue":"batch","shell":{"options":{"cpu-affinity":"per-task"}}},"user":{"study":7}},"version":1}`
	if b != want {
		t.Errorf("MarshalJSON =\n%s\nwant\n%s", b, want)
	}
}

func TestAccessors(t *testing.T) {
	js, err := ParseV1([]byte(v1YAML))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := js.Duration(); err != nil || d != 3600 {
		t.Errorf("Duration() = %v, %v", d, err)
	}
	if js.Cwd() != "/home/flux" || js.Queue() != "batch" || js.JobName() != "myjob" {
		t.Errorf("Cwd %q Queue %q JobName %q", js.Cwd(), js.Queue(), js.JobName())
	}
	if env := js.Environment(); !reflect.DeepEqual(env, map[string]string{"HOME": "/home/flux"}) {
		t.Errorf("Environment() = %v", env)
	}
	if o := js.ShellOptions(); o["cpu-affinity"] != "per-task" {
		t.Errorf("ShellOptions() = %v", o)
	}
	c, err := js.Constraints()
	if err != nil || c.Op != OpProperties || !reflect.DeepEqual(c.Values, []string{"ssd"}) {
		t.Errorf("Constraints() = %+v, %v", c, err)
	}
	deps, err := js.Dependencies()
	if err != nil || len(deps) != 1 || deps[0].Scheme != "afterok" || deps[0].Value != "ƒ2oLkTLb" {
		t.Errorf("Dependencies() = %+v, %v", deps, err)
	}
	if v, ok := js.Attribute("user.study"); !ok || v != int64(7) {
		t.Errorf("Attribute(user.study) = %v, %v", v, ok)
	}
	if _, ok := js.Attribute("system.nope.x"); ok {
		t.Error("Attribute(system.nope.x) found")
	}
	if js.NNodes() != 2 || js.NSlots() != 4 || js.CoresPerSlot() != 4 || js.GPUsPerSlot() != 1 ||
		js.NTasks() != 4 || !js.NodeExclusive() {
		t.Errorf("counts: nodes %d slots %d cores/slot %d gpus/slot %d tasks %d exclusive %v",
			js.NNodes(), js.NSlots(), js.CoresPerSlot(), js.GPUsPerSlot(), js.NTasks(), js.NodeExclusive())
	}
}

func TestDurationForms(t *testing.T) {
	tests := []struct {
		val  any
		want float64
		err  bool
	}{
		{nil, 0, false}, // absent
		{int64(0), 0, false},
		{int64(60), 60, false},
		{1.5, 1.5, false},
		{"1.5m", 90, false},
		{"infinity", 0, false},
		{"3x", 0, true},
		{true, 0, true},
	}
	for _, tt := range tests {
		js := mustBuild(t)
		if tt.val == nil {
			delete(js.Attributes.System, "duration")
		} else {
			js.Attributes.System["duration"] = tt.val
		}
		got, err := js.Duration()
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("Duration() with %#v = %v, %v", tt.val, got, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "attributes.system.duration: ") {
			t.Errorf("error %q does not name the key", err)
		}
	}
}

func TestSetters(t *testing.T) {
	js := mustBuild(t)
	if err := js.SetDuration(90); err != nil {
		t.Fatal(err)
	}
	if err := js.SetDuration(-1); err == nil {
		t.Error("SetDuration(-1) succeeded")
	}
	js.SetCwd("/tmp")
	js.SetQueue("debug")
	js.SetEnvironment(map[string]string{"A": "1"})
	if err := js.SetJobName("x"); err != nil {
		t.Fatal(err)
	}
	if err := js.SetShellOption("output.stdout.path", "out.txt"); err != nil {
		t.Fatal(err)
	}
	if err := js.SetShellOption("output.stdout.type", "file"); err != nil {
		t.Fatal(err)
	}
	if err := js.SetAttribute("user.tags", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConstraintQuery("a|b")
	if err != nil {
		t.Fatal(err)
	}
	js.SetConstraints(c)
	d, err := ParseDependencyURI("afterany:123")
	if err != nil {
		t.Fatal(err)
	}
	js.SetDependencies([]Dependency{d})
	if err := js.ValidateV1(); err != nil {
		t.Fatal(err)
	}
	want := `{"resources":[{"type":"slot","count":1,"with":[{"type":"core","count":1}],"label":"task"}],` +
		`"tasks":[{"command":["app"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{` +
		`"constraints":{"or":[{"properties":["a"]},{"properties":["b"]}]},"cwd":"/tmp",` +
		`"dependencies":[{"scheme":"afterany","value":"123"}],"duration":90.0,"environment":{"A":"1"},` +
		`"job":{"name":"x"},"queue":"debug","shell":{"options":{"output":{"stdout":{"path":"out.txt","type":"file"}}}}},` +
		`"user":{"tags":["a","b"]}},"version":1}`
	if got := mustJSON(t, js); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	checkRoundTrip(t, js)

	// Errors.
	if err := js.SetAttribute("foo.bar", 1); err == nil {
		t.Error("SetAttribute without system./user. prefix succeeded")
	}
	if err := js.SetAttribute("system.cwd.x", 1); err == nil ||
		!strings.Contains(err.Error(), "attributes.system.cwd is a string, not a mapping") {
		t.Errorf("SetAttribute through a string: %v", err)
	}
	if err := js.SetAttribute("system..x", 1); err == nil {
		t.Error("SetAttribute with empty component succeeded")
	}
	if err := js.SetAttribute("system.x", struct{}{}); err == nil {
		t.Error("SetAttribute with a struct succeeded")
	}
	js.SetDependencies(nil)
	js.SetConstraints(nil)
	if _, ok := js.Attributes.System["dependencies"]; ok {
		t.Error("SetDependencies(nil) left the key")
	}
	if _, ok := js.Attributes.System["constraints"]; ok {
		t.Error("SetConstraints(nil) left the key")
	}
}

// Rule errors beyond the conformance files: each input is a V1 jobspec
// with one edit, given as a function.
func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(js *Jobspec)
		path string
		v1   bool // only ValidateV1 rejects it
	}{
		{"duplicate label", func(js *Jobspec) {
			js.Resources = append(js.Resources, js.Resources[0])
		}, "resources[1].label", false},
		{"slot without with", func(js *Jobspec) { js.Resources[0].With = nil }, "resources[0].with", false},
		{"negative duration", func(js *Jobspec) { js.Attributes.System["duration"] = -1.0 }, "attributes.system.duration", false},
		{"string duration", func(js *Jobspec) { js.Attributes.System["duration"] = "1h" }, "attributes.system.duration", false},
		{"cwd not string", func(js *Jobspec) { js.Attributes.System["cwd"] = int64(1) }, "attributes.system.cwd", false},
		{"env value", func(js *Jobspec) {
			js.Attributes.System["environment"] = map[string]any{"B": "x", "A": int64(1), "C": true}
		}, "attributes.system.environment.A", false},
		{"job value", func(js *Jobspec) { js.Attributes.System["job"] = map[string]any{"name": int64(1)} }, "attributes.system.job.name", false},
		{"shell options", func(js *Jobspec) { js.Attributes.System["shell"] = map[string]any{"options": "x"} }, "attributes.system.shell.options", false},
		{"empty dependencies", func(js *Jobspec) { js.Attributes.System["dependencies"] = []any{} }, "attributes.system.dependencies", false},
		{"dependency scheme", func(js *Jobspec) {
			js.Attributes.System["dependencies"] = []any{map[string]any{"value": "1"}}
		}, "attributes.system.dependencies[0].scheme", false},
		{"constraint op", func(js *Jobspec) {
			js.Attributes.System["constraints"] = map[string]any{"or": []any{map[string]any{"color": []any{"red"}}}}
		}, "attributes.system.constraints.or[0].color", false},
		{"constraint property", func(js *Jobspec) {
			js.Attributes.System["constraints"] = map[string]any{"properties": []any{"a|b"}}
		}, "attributes.system.constraints.properties[0]", false},
		{"constraint ranks", func(js *Jobspec) {
			js.Attributes.System["constraints"] = map[string]any{"ranks": []any{"3-1"}}
		}, "attributes.system.constraints.ranks[0]", false},
		{"task count none", func(js *Jobspec) { js.Tasks[0].Count = TaskCount{} }, "tasks[0].count", false},
		{"task count two", func(js *Jobspec) { js.Tasks[0].Count = TaskCount{PerSlot: 1, Total: 2} }, "tasks[0].count", false},
		{"empty command", func(js *Jobspec) { js.Tasks[0].Command = nil }, "tasks[0].command", false},
		{"no tasks", func(js *Jobspec) { js.Tasks = nil }, "tasks", false},
		{"no resources", func(js *Jobspec) { js.Resources = nil }, "resources", false},
		{"count range and set", func(js *Jobspec) {
			js.Resources[0].Count = Count{Range: &CountRange{Min: 1}, Set: "1"}
		}, "resources[0].count", false},
		{"bad count string", func(js *Jobspec) { js.Resources[0].Count = Count{Set: "2-1"} }, "resources[0].count", false},

		{"version 2", func(js *Jobspec) { js.Version = 2 }, "version", true},
		{"two resources", func(js *Jobspec) {
			r := js.Resources[0]
			r.Label = "other"
			js.Resources = append(js.Resources, r)
		}, "resources", true},
		{"top core", func(js *Jobspec) { js.Resources[0] = js.Resources[0].With[0] }, "resources[0].type", true},
		{"range count", func(js *Jobspec) { js.Resources[0].Count = Count{Set: "2+"} }, "resources[0].count", true},
		{"no core", func(js *Jobspec) { js.Resources[0].With[0].Type = "gpu" }, "resources[0].with", true},
		{"memory", func(js *Jobspec) {
			js.Resources[0].With = append(js.Resources[0].With, Resource{Type: "memory", Count: FixedCount(4)})
		}, "resources[0].with[1].type", true},
		{"core with", func(js *Jobspec) {
			js.Resources[0].With[0].With = []Resource{{Type: "gpu", Count: FixedCount(1)}}
		}, "resources[0].with[0].with", true},
		{"per_slot 2", func(js *Jobspec) { js.Tasks[0].Count.PerSlot = 2 }, "tasks[0].count.per_slot", true},
		{"per_resource", func(js *Jobspec) {
			js.Tasks[0].Count = TaskCount{PerResource: &PerResource{Type: "core", Count: 1}}
		}, "tasks[0].count.per_resource", true},
		{"total below nodes", func(js *Jobspec) {
			js.Resources[0] = nodeVertex(3, false, js.Resources[0])
			js.Tasks[0].Count = TaskCount{Total: 2}
		}, "tasks[0].count.total", true},
		{"two tasks", func(js *Jobspec) { js.Tasks = append(js.Tasks, js.Tasks[0]) }, "tasks", true},
		{"no duration", func(js *Jobspec) { delete(js.Attributes.System, "duration") }, "attributes.system.duration", true},
		{"no system", func(js *Jobspec) { js.Attributes.System = nil }, "attributes.system", true},
		{"task attributes", func(js *Jobspec) { js.Tasks[0].Attributes = map[string]any{} }, "tasks[0].attributes", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := mustBuild(t)
			tt.edit(js)
			err := js.Validate()
			if tt.v1 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				err = js.ValidateV1()
				if !errors.Is(err, ErrNotV1) {
					t.Fatalf("ValidateV1 error %v does not wrap ErrNotV1", err)
				}
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v, want *Error", err)
			}
			if e.Path != tt.path {
				t.Errorf("error %q names %q, want %q", err, e.Path, tt.path)
			}
		})
	}
}

// Decoding errors for shapes the conformance files do not cover.
func TestParseErrors(t *testing.T) {
	base := "version: 1\nresources: [{type: slot, count: 1, label: task, with: [{type: core, count: 1}]}]\n" +
		"tasks: [{command: [app], slot: task, count: {per_slot: 1}}]\n"
	tests := []struct {
		name, doc, path string
		syntax          bool
	}{
		{"empty", "", "", true},
		{"blank", "  \n", "", true},
		{"two documents", base + "attributes: {}\n---\na: 1\n", "", true},
		{"not a mapping", "[1, 2]", "", false},
		{"unknown top key", base + "attributes: {}\nextra: 1\n", "extra", false},
		{"unknown resource key", "version: 1\nresources: [{type: slot, count: 1, label: t, with: [{type: core, count: 1}], color: red}]\n" +
			"tasks: [{command: [app], slot: t, count: {per_slot: 1}}]\nattributes: {}\n", "resources[0].color", false},
		{"unknown task key", "version: 1\nresources: [{type: node, count: 1}]\n" +
			"tasks: [{command: [app], slot: t, count: {per_slot: 1}, x: 1}]\nattributes: {}\n", "tasks[0].x", false},
		{"unknown task count key", "version: 1\nresources: [{type: node, count: 1}]\n" +
			"tasks: [{command: [app], slot: t, count: {per_node: 1}}]\nattributes: {}\n", "tasks[0].count.per_node", false},
		{"per_resource count", "version: 1\nresources: [{type: node, count: 1}]\n" +
			"tasks: [{command: [app], slot: t, count: {per_resource: {type: node, count: 0}}}]\nattributes: {}\n",
			"tasks[0].count.per_resource.count", false},
		{"empty with", "version: 1\nresources: [{type: node, count: 1, with: []}]\n" +
			"tasks: [{command: [app], slot: t, count: {total: 1}}]\nattributes: {}\n", "resources[0].with", false},
		{"float count", "version: 1\nresources: [{type: node, count: 1.0}]\n" +
			"tasks: [{command: [app], slot: t, count: {total: 1}}]\nattributes: {}\n", "resources[0].count", false},
		{"system null", base + "attributes: {system: }\n", "attributes.system", false},
		{"user list", base + "attributes: {user: [1]}\n", "attributes.user", false},
		{"nan", base + "attributes: {system: {duration: .nan}}\n", "attributes.system.duration", false},
		{"duplicate key", base + "attributes: {user: {x: 1, x: 2}}\n", "attributes.user.x", false},
		{"binary", base + "attributes: {user: {x: !!binary aGVsbG8=}}\n", "attributes.user.x", false},
		{"json trailing", `{"version": 1} x`, "", true},
		{"json bad", `{"version": 1`, "", true},
		{"json huge int", `{"version": 99999999999999999999}`, "version", false},
		{"json huge float", `{"version": 1e999}`, "version", false},
		{"empty slot", "version: 1\nresources: [{type: node, count: 1}]\n" +
			"tasks: [{command: [app], slot: '', count: {total: 1}}]\nattributes: {}\n", "tasks[0].slot", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error = %v, want *Error", err)
			}
			if tt.syntax != errors.Is(err, ErrSyntax) {
				t.Errorf("error %q: syntax = %v, want %v", err, errors.Is(err, ErrSyntax), tt.syntax)
			}
			if e.Path != tt.path {
				t.Errorf("error %q names %q, want %q", err, e.Path, tt.path)
			}
		})
	}
}

func TestYAMLFeatures(t *testing.T) {
	doc := `
defaults: &res
  type: core
  count: 2
version: 1
resources:
  - type: slot
    count: 1
    label: task
    with:
      - *res
tasks:
  - command: [app]
    slot: task
    count: {per_slot: 1}
attributes:
  system:
    duration: 0
    shell:
      options:
        <<: {a: 1, b: 2}
        b: 3
`
	// An anchor on an extra top-level key is still an unknown key.
	if _, err := Parse([]byte(doc)); err == nil || !strings.HasPrefix(err.Error(), "defaults: ") {
		t.Fatalf("Parse = %v, want unknown key defaults", err)
	}
	doc = strings.Replace(doc, "defaults: &res\n  type: core\n  count: 2\n", "", 1)
	doc = strings.Replace(doc, "- *res", "- &res {type: core, count: 2}", 1)
	js, err := ParseV1([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := js.ShellOptions(); !reflect.DeepEqual(got, map[string]any{"a": int64(1), "b": int64(3)}) {
		t.Errorf("merged shell options = %v", got)
	}
	if js.CoresPerSlot() != 2 {
		t.Errorf("CoresPerSlot = %d", js.CoresPerSlot())
	}
}

func TestAliasBomb(t *testing.T) {
	doc := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := 0; i < 8; i++ {
		name := string(rune('b' + i))
		doc += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	_, err := Parse([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("Parse(alias bomb) = %v", err)
	}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		file                             string
		nodes, slots, cores, gpus, tasks int
		exclusive                        bool
	}{
		{"valid/example1.yaml", 4, 4, 2, 0, 4, false},
		{"valid/use_case_2.1.yaml", 4, 4, 0, 0, 20, false},
		{"valid/use_case_2.2.yaml", 4, 4, 0, 0, 5, false},
		{"valid/use_case_1.3.yaml", 4, 4, 8, 0, 4, false},
		{"valid/use_case_1.6.yaml", 2, 2, 30, 0, 2, false},
		{"valid/use_case_1.11.yaml", 2, 4, 5, 7, 2, true},
		{"valid/use_case_2.4.yaml", 1, 11, 1, 0, 11, false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			js, err := Parse(readFile(t, testdata+"/jobspec/"+tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got := []int{js.NNodes(), js.NSlots(), js.CoresPerSlot(), js.GPUsPerSlot(), js.NTasks()}
			want := []int{tt.nodes, tt.slots, tt.cores, tt.gpus, tt.tasks}
			if !reflect.DeepEqual(got, want) || js.NodeExclusive() != tt.exclusive {
				t.Errorf("nodes,slots,cores/slot,gpus/slot,tasks = %v excl %v, want %v excl %v",
					got, js.NodeExclusive(), want, tt.exclusive)
			}
		})
	}
}

func TestCountStrings(t *testing.T) {
	good := map[string]int{"1": 1, "4,9,16,25": 4, "2-8": 2, "[3-5]": 3, "2+": 2, "2-32:2:*": 2,
		"2-32:2": 2, "[2+]": 2, "3-27:3:^": 3, "1+:1": 1}
	for s, min := range good {
		r, err := parseCountString(s)
		if err != nil || r.Min != min {
			t.Errorf("parseCountString(%q) = %+v, %v; want min %d", s, r, err, min)
		}
		if got := (Count{Set: s}).Min(); got != min {
			t.Errorf("Count{Set: %q}.Min() = %d", s, got)
		}
	}
	for _, s := range []string{"", "0", "0-3", "bar", "3,1", "1,1", "01", "2-32:1:*", "1-2:2:^", "2-1",
		"2-32:2:-", "2:3", "1-2:3:+:4", "-2", "2++", "[2+"} {
		if _, err := parseCountString(s); err == nil {
			t.Errorf("parseCountString(%q) succeeded", s)
		}
	}
	if s := (Count{Range: &CountRange{Min: 2, Max: 8, Operator: "*", Operand: 2}}).String(); s != "{min: 2, max: 8, operator: *, operand: 2}" {
		t.Errorf("String() = %q", s)
	}
}

func TestUnmarshalJSON(t *testing.T) {
	var js Jobspec
	if err := js.UnmarshalJSON([]byte(mustJSON(t, mustBuild(t)))); err != nil {
		t.Fatal(err)
	}
	if js.NTasks() != 1 {
		t.Errorf("NTasks = %d", js.NTasks())
	}
	if err := js.UnmarshalJSON([]byte(`{"version": 0}`)); err == nil {
		t.Error("UnmarshalJSON accepted a bad jobspec")
	}
}

func TestEncodeStrings(t *testing.T) {
	js := mustBuild(t)
	js.Tasks[0].Command = []string{"a\"b\\c\n\t\r\x01<>&é", "bad\xffutf8"}
	got := mustJSON(t, js)
	want := `"command":["a\"b\\c\n\t\r\u0001<>&é","bad` + "\ufffd" + `utf8"]`
	if !strings.Contains(got, want) {
		t.Errorf("encoded %s, want it to contain %s", got, want)
	}
	js.Attributes.System["x"] = []any{1e21, 0.5, int64(-3), false, nil}
	if got := mustJSON(t, js); !strings.Contains(got, `"x":[1e+21,0.5,-3,false,null]`) {
		t.Errorf("encoded %s", got)
	}
	js.Attributes.System["bad"] = struct{}{}
	if _, err := js.MarshalJSON(); err == nil {
		t.Error("MarshalJSON accepted a struct attribute")
	}
}

func TestCheckText(t *testing.T) {
	js, err := FromCommand([]string{"echo", "ok"}, CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := js.CheckText(); err != nil {
		t.Fatalf("valid jobspec: %v", err)
	}
	js.Tasks[0].Command[1] = "bad\xff"
	if err := js.CheckText(); err == nil || !strings.Contains(err.Error(), `tasks[0].command[1] is not valid UTF-8 ("bad\xff")`) {
		t.Errorf("bad argument: %v", err)
	}
	js.Tasks[0].Command[1] = "ok"
	js.SetEnvironment(map[string]string{"X": "\xc3("})
	if err := js.CheckText(); err == nil || !strings.Contains(err.Error(), "attributes.system.environment.X is not valid UTF-8") {
		t.Errorf("bad environment value: %v", err)
	}
	js.SetEnvironment(map[string]string{"\xfe": "x"})
	if err := js.CheckText(); err == nil || !strings.Contains(err.Error(), "attributes.system.environment key is not valid UTF-8") {
		t.Errorf("bad environment name: %v", err)
	}
}
