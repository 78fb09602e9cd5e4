package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestUpdateKey(t *testing.T) {
	for in, want := range map[string]string{
		"duration":                   "attributes.system.duration",
		"queue":                      "attributes.system.queue",
		"name":                       "attributes.system.job.name",
		"myattr":                     "attributes.system.myattr",
		"job.name":                   "attributes.system.job.name",
		"attributes.system.duration": "attributes.system.duration",
		"attributes.user.x":          "attributes.user.x",
		"tasks.0.command":            "tasks.0.command",
		"resources.0.count":          "resources.0.count",
		"attributesx":                "attributes.system.attributesx",
	} {
		if got := updateKey(in); got != want {
			t.Errorf("updateKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// runUpdateMain runs flux update and returns its exit code and output.
func runUpdateMain(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(append([]string{"update"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// --dry-run prints only the updates object, as Python's json.dumps
// writes it, without asking the broker (no relative durations here).
func TestUpdateDryRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"duration=10m"}, `{"attributes.system.duration": 600.0}`},
		{[]string{"duration=1.5h", "name=foo"}, `{"attributes.system.duration": 5400.0, "attributes.system.job.name": "foo"}`},
		{[]string{"duration=90"}, `{"attributes.system.duration": 90.0}`},
		{[]string{"duration=inf"}, `{"attributes.system.duration": 0.0}`},
		{[]string{"duration=INFINITY"}, `{"attributes.system.duration": 0.0}`},
		{[]string{"attributes.system.duration=inf"}, `{"attributes.system.duration": 0.0}`},
		{[]string{"duration=0"}, `{"attributes.system.duration": 0.0}`},
		{[]string{"myattr=1"}, `{"attributes.system.myattr": 1}`},
		{[]string{`myattr="value"`}, `{"attributes.system.myattr": "value"}`},
		{[]string{"myattr=value"}, `{"attributes.system.myattr": "value"}`},
		{[]string{"queue=debug"}, `{"attributes.system.queue": "debug"}`},
		{[]string{"myattr="}, `{"attributes.system.myattr": ""}`},
		{[]string{"a=1", "b=2", "a=3"}, `{"attributes.system.a": 3, "attributes.system.b": 2}`},
		{[]string{`x={"b":1,"a":[1.0,2e3,true,null,"s"]}`}, `{"attributes.system.x": {"b": 1, "a": [1.0, 2000.0, true, null, "s"]}}`},
		{[]string{"s=héllo\t😀"}, `{"attributes.system.s": "h\u00e9llo\t\ud83d\ude00"}`},
		{[]string{"f=0.1", "g=1e-5", "h=1e16", "i=-0"}, `{"attributes.system.f": 0.1, "attributes.system.g": 1e-05, "attributes.system.h": 1e+16, "attributes.system.i": 0}`},
		{[]string{"tasks.x=1", "resources.y=2", "attributes.user.z=zz"}, `{"tasks.x": 1, "resources.y": 2, "attributes.user.z": "zz"}`},
		{[]string{"k=a=b"}, `{"attributes.system.k": "a=b"}`},
	} {
		for _, opt := range []string{"-n", "--dry-run"} {
			args := append([]string{opt, "123"}, tc.args...)
			code, out, errs := runUpdateMain(args...)
			if code != 0 || out != tc.want+"\n" || errs != "" {
				t.Errorf("flux update %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(args, " "), code, out, errs, tc.want)
			}
		}
	}
}

// Bad input names the key and value; command-line errors exit 2, bad
// values 1.
func TestUpdateErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "JOBID"},
		{[]string{"123"}, 2, "KEY=VALUE"},
		{[]string{"123", "foo"}, 2, `"foo": want KEY=VALUE`},
		{[]string{"123", "=1"}, 2, `"=1": want KEY=VALUE`},
		{[]string{"--bogus", "123", "a=1"}, 2, "unknown flag: --bogus"},
		{[]string{"-n", "not-a-job", "a=1"}, 1, `invalid jobid "not-a-job"`},
		{[]string{"-n", "123", "duration=foo"}, 1, `attributes.system.duration=foo: invalid Flux standard duration "foo"`},
		{[]string{"-n", "123", "duration=-5h3"}, 1, `attributes.system.duration=-5h3: invalid Flux standard duration "5h3"`},
		{[]string{"-n", "123", "duration=1x"}, 1, `attributes.system.duration=1x: invalid Flux standard duration "1x"`},
		{[]string{"-n", "123", "attributes.system.duration="}, 1, `attributes.system.duration=: invalid Flux standard duration ""`},
	} {
		code, out, errs := runUpdateMain(tc.args...)
		if code != tc.code || out != "" || !strings.HasPrefix(errs, "flux-update: ") || !strings.Contains(errs, tc.want) {
			t.Errorf("flux update %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, errs, tc.code, tc.want)
		}
	}
}

// --verbose shows values as Python's str() does.
func TestUpdatePyValueStr(t *testing.T) {
	for in, want := range map[string]string{
		`"value"`:                `value`,
		`plain`:                  `plain`,
		`1`:                      `1`,
		`1.0`:                    `1.0`,
		`600`:                    `600`,
		`true`:                   `True`,
		`null`:                   `None`,
		`[1, "a", false]`:        `[1, 'a', False]`,
		`{"k": "it's", "n": {}}`: `{'k': "it's", 'n': {}}`,
		`["a\nb", "q'\""]`:       `['a\nb', 'q\'"']`,
	} {
		v, ok := parsePyJSON(in)
		if !ok {
			v = pyStrValue(in)
		}
		if got := v.Str(); got != want {
			t.Errorf("str(%s) = %s, want %s", in, got, want)
		}
	}
	if got := pyFloatValue(600).Str(); got != "600.0" {
		t.Errorf("str(600.0) = %s", got)
	}
}
