package cli

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   []string
		err    string
	}{
		{"none", "#!/bin/sh\nhostname\n", nil, ""},
		{"shell", "#!/bin/sh\n# flux: -N4 -n16\nflux run -n16 hostname\n", []string{"-N4", "-n16"}, ""},
		{"nostalgia", "#!/bin/sh\n#FLUX: -N4                  # Request four nodes\n#FLUX: --queue=batch        # Submit to the batch queue\n#FLUX: --job-name=app001\nflux run -N4 app\n",
			[]string{"-N4", "--queue=batch", "--job-name=app001"}, ""},
		{"comments between", "#!/bin/sh\n# Set flux directives\n#FLUX: -N1\n# Set job name:\n#FLUX: --job-name=test\nhostname; date\n",
			[]string{"-N1", "--job-name=test"}, ""},
		{"blank lines between", "#!/bin/sh\n# flux: -N1\n\n   \n# flux: -n2\necho\n", []string{"-N1", "-n2"}, ""},
		{"lua", "#!/usr/bin/lua\n--\n-- flux: -N1 --exclusive\n-- flux: --output=job.out\nlocal app = require 'app'\n",
			[]string{"-N1", "--exclusive", "--output=job.out"}, ""},
		{"python docstring", "#!/usr/bin/env python3\n\"\"\"\nflux: --nodes=4\n\nSet an arbitrary value in jobspec:\nflux: --setattr=user.foo=\"hello, earth\"\n\"\"\"\n",
			[]string{"--nodes=4", "--setattr=user.foo=hello, earth"}, ""},
		{"single quotes", "# flux: --setattr=user.data='{\"option\": \"arg\"}'\n", []string{`--setattr=user.data={"option": "arg"}`}, ""},
		{"triple quotes inline", "# flux: --setattr=user.foo=\"\"\"{\"key\": 42}\"\"\"\n# flux: --setattr=user.bar='''It's a \"job\"'''\n",
			[]string{`--setattr=user.foo={"key": 42}`, `--setattr=user.bar=It's a "job"`}, ""},
		{"triple quotes multiline", "# flux: --setattr=user.conf=\"\"\"\n# flux: [config]\n# flux:   item = \"foo\"\n# flux: \"\"\"\n",
			[]string{"--setattr=user.conf=[config]\n  item = \"foo\"\n"}, ""},
		{"commented out", "# flux: -N4\n# flux: # -N8\n# flux: # testing nodes\n", []string{"-N4"}, ""},
		{"backslash and double quotes", `# flux: --job-name="a \"b\" \$c" x\ y` + "\n", []string{`--job-name=a "b" $c`, "x y"}, ""},
		{"hash inside word", "# flux: --job-name=a#b\n", []string{"--job-name=a#b"}, ""},
		{"orphan", "#!/bin/sh\n#FLUX: -N1\nhostname; date\n#FLUX: --job-name=test\n", nil, "orphan directive"},
		{"mixed sentinels", "# flux: -N1\n#FLUX: -n1\n", nil, "sentinel"},
		{"changed prefix", "# flux: -N4\n## flux: -N8\n", nil, "sentinel"},
		{"unterminated quote", "# flux: --job-name='abc\n", nil, "unterminated single quote"},
		{"unterminated multiline", "# flux: --setattr=user.x=\"\"\"\n# flux: a\n", nil, "unterminated multi-line"},
		{"multiline interrupted", "# flux: --setattr=user.x=\"\"\"\nfoo\n# flux: \"\"\"\n", nil, "must continue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDirectives(tc.script)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrDirective) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("words %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSentinelOf(t *testing.T) {
	for _, tc := range []struct {
		line, sentinel, prefix string
		ok                     bool
	}{
		{"# flux: -N1", "# flux:", "# ", true},
		{"#FLUX:-N1", "#FLUX:", "#", true},
		{"flux: -N1", "flux:", "", true},
		{"    flux: x", "    flux:", "    ", true},
		{"x flux: -N1", "", "", false},
		{"#flux -N1", "", "", false},
		{"_flux: -N1", "", "", false},
		{"#Flux: -N1", "", "", false},
	} {
		s, p, _, ok := sentinelOf(tc.line)
		if s != tc.sentinel || p != tc.prefix || ok != tc.ok {
			t.Errorf("sentinelOf(%q) = %q, %q, %v", tc.line, s, p, ok)
		}
	}
}

func TestDedent(t *testing.T) {
	if got := dedent(" [config]\n   item = 1\n "); got != "[config]\n  item = 1\n" {
		t.Fatalf("%q", got)
	}
}

func FuzzParseDirectives(f *testing.F) {
	f.Add("#!/bin/sh\n# flux: -N4 -n16\nflux run hostname\n")
	f.Add("# flux: --setattr=user.conf=\"\"\"\n# flux: [config]\n# flux: \"\"\"\n")
	f.Add("# flux: 'a\n")
	f.Add("flux: \\")
	f.Fuzz(func(t *testing.T, s string) {
		words, err := parseDirectives(s)
		if err != nil && !errors.Is(err, ErrDirective) {
			t.Fatalf("error of the wrong kind: %v", err)
		}
		if err == nil && !strings.Contains(s, "flux:") && !strings.Contains(s, "FLUX:") && len(words) > 0 {
			t.Fatalf("words %q from a script without directives", words)
		}
	})
}
