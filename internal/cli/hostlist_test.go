package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestHostlistCommand(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stdin  string
		want   string // stdout
		code   int
		errout string // a substring of stderr
	}{
		{name: "concatenate", args: []string{"foo[1-2]", "n3", "bar"}, want: "foo[1-2],n3,bar\n"},
		{name: "job ID needs an instance", args: []string{"foo3"}, code: 1, errout: "flux-hostlist: ERROR: job foo3: FLUX_URI is not set"},
		{name: "f58 job ID needs an instance", args: []string{"ƒ2NJg2mg3"}, code: 1, errout: "flux-hostlist: ERROR: job ƒ2NJg2mg3: FLUX_URI is not set"},
		{name: "non-ASCII host named in full", args: []string{"nodé1"}, code: 1, errout: `character 'é' at offset 3`},
		{name: "bad option", args: []string{"--bogus"}, code: 2, errout: "flux-hostlist: unknown flag: --bogus"},
		{name: "keeps order and repeats", args: []string{"n[3,1]", "n1"}, want: "n[3,1,1]\n"},
		{name: "stdin default", stdin: "n1 n2\nn3\n\n  n[5-6]  \n", want: "n[1-3,5-6]\n"},
		{name: "stdin dash", args: []string{"a", "-"}, stdin: "n1\n", want: "a,n1\n"},
		{name: "stdin word", args: []string{"stdin"}, stdin: "n[1-2]", want: "n[1-2]\n"},
		{name: "empty", args: []string{""}, want: ""},
		{name: "expand", args: []string{"-e", "n[1-3]"}, want: "n1 n2 n3\n"},
		{name: "expand delimiter", args: []string{"-e", "-d", ",", "n[1-3]"}, want: "n1,n2,n3\n"},
		{name: "expand newline", args: []string{"-ed", `\n`, "n[1-2]"}, want: "n1\nn2\n"},
		{name: "expand empty", args: []string{"-e", ""}, want: ""},
		{name: "count", args: []string{"-c", "n[1-3]", "n1"}, want: "4\n"},
		{name: "count empty", args: []string{"-c", ""}, want: "0\n"},
		{name: "sort", args: []string{"-S", "n10,n9,n1", "n9"}, want: "n[1,9,9-10]\n"},
		{name: "union", args: []string{"-u", "n[3,1]", "n[1-2]"}, want: "n[1-3]\n"},
		{name: "unique alias", args: []string{"--unique", "n[3,1]", "n[1-2]"}, want: "n[1-3]\n"},
		{name: "intersect", args: []string{"-i", "n[1-5]", "n[4-8]", "n[0,4-5]"}, want: "n[4-5]\n"},
		{name: "intersect dedups", args: []string{"-i", "n[5,1,1]", "n[1-5]"}, want: "n[1,5]\n"},
		{name: "intersect one list", args: []string{"-i", "n[3,1,1]"}, want: "n[3,1,1]\n"},
		{name: "minus", args: []string{"-m", "n[1-6]", "n2", "n[4-5]"}, want: "n[1,3,6]\n"},
		{name: "minus one occurrence each", args: []string{"-m", "n[1,1,2]", "n1"}, want: "n[1-2]\n"},
		{name: "xor", args: []string{"-X", "n[1-4]", "n[3-6]"}, want: "n[1-2,5-6]\n"},
		{name: "xor three", args: []string{"-X", "n[1-2]", "n[2-3]", "n[3-4]"}, want: "n[1,4]\n"},
		{name: "exclude hosts", args: []string{"-x", "n[2-3]", "n[1-5],n2"}, want: "n[1,4-5]\n"},
		{name: "exclude indices", args: []string{"-x", "0,2", "n[1-5]"}, want: "n[2,4-5]\n"},
		{name: "exclude index past end", args: []string{"-x", "7", "n[1-2]"}, want: "n[1-2]\n"},
		{name: "exclude host named like an index", args: []string{"-x", "1", "[0-3]"}, want: "[0,2-3]\n"},
		{name: "exclude no match", args: []string{"-x", "foo", "n[1-2]"}, want: "n[1-2]\n"},
		{name: "limit", args: []string{"-L", "2", "n[1-5]"}, want: "n[1-2]\n"},
		{name: "limit last", args: []string{"-L", "-2", "n[1-5]"}, want: "n[4-5]\n"},
		{name: "limit last equals", args: []string{"--limit=-2", "n[1-5]"}, want: "n[4-5]\n"},
		{name: "limit larger", args: []string{"-L", "9", "n[1-5]"}, want: "n[1-5]\n"},
		{name: "nth", args: []string{"-n", "0", "n[1-5]"}, want: "n1\n"},
		{name: "nth idset", args: []string{"-n", "0-1,4", "n[1-5]"}, want: "n[1-2,5]\n"},
		{name: "nth last", args: []string{"-n", "-1", "n[1-5]"}, want: "n5\n"},
		{name: "nth from end keeps order", args: []string{"--nth=-1-2,5", "n[1-5]"}, want: "n[1,4-5]\n"},
		{name: "nth out of range", args: []string{"-n", "5", "n[1-5]"}, code: 1, errout: "flux-hostlist: ERROR: --nth: index 5 is out of range"},
		{name: "nth minus zero", args: []string{"-n", "-0", "n[1-5]"}, code: 1, errout: "flux-hostlist: ERROR: --nth: index -0"},
		{name: "nth from end out of range", args: []string{"-n", "-6", "n[1-5]"}, code: 1, errout: "index -6 is out of range"},
		{name: "nth bad idset", args: []string{"-n", "x", "n[1-5]"}, code: 1, errout: `flux-hostlist: ERROR: --nth: invalid idset "x"`},
		{name: "nth with sort", args: []string{"-S", "-n", "0", "n[3,1,2]"}, want: "n1\n"},
		{name: "find", args: []string{"-F", "n[5,2]", "n[1-5]"}, want: "4 1\n"},
		{name: "find first occurrence", args: []string{"-F", "n1", "n[2,1,1]"}, want: "1\n"},
		{name: "find missing", args: []string{"-F", "n9", "n[1-5]"}, code: 1, errout: "flux-hostlist: ERROR: --find: host n9 is not in the hostlist"},
		{name: "quiet", args: []string{"-q", "n1"}, want: ""},
		{name: "quiet empty", args: []string{"-q", "-i", "n1", "n2"}, code: 1},
		{name: "quiet count", args: []string{"-qc", "n1"}, want: ""},
		{name: "fallback accepted", args: []string{"-f", "foo1", "foo2"}, want: "foo[1-2]\n"},
		{name: "bad hostlist", args: []string{"foo[1-"}, code: 1, errout: `flux-hostlist: ERROR: invalid hostlist "foo[1-"`},
		{name: "bad stdin", stdin: "n1\nn[\n", code: 1, errout: "flux-hostlist: ERROR: stdin line 2: invalid hostlist"},
		{name: "instance source", args: []string{"instance"}, code: 1, errout: `flux-hostlist: ERROR: instance: FLUX_URI is not set`},
		{name: "avail source", args: []string{"avail"}, code: 1, errout: `flux-hostlist: ERROR: avail: FLUX_URI is not set`},
		{name: "local option", args: []string{"-l"}, code: 1, errout: `flux-hostlist: ERROR: local: FLUX_URI is not set`},
		{name: "expand and count", args: []string{"-e", "-c", "n1"}, code: 2, errout: "flux-hostlist: --expand and --count cannot be used together"},
		{name: "two set operations", args: []string{"-i", "-m", "n1"}, code: 2, errout: "only one of --intersect, --minus and --xor"},
	}
	t.Setenv("FLUX_URI", "")
	t.Setenv("FLUX_JOB_ID", "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"hostlist"}, tt.args...), strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
			if got := stdout.String(); got != tt.want {
				t.Errorf("stdout %q, want %q", got, tt.want)
			}
			if tt.errout == "" && stderr.Len() > 0 {
				t.Errorf("unexpected stderr %q", stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.errout) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.errout)
			}
		})
	}
}

func TestRunHostlistStdinReadOnce(t *testing.T) {
	var out bytes.Buffer
	err := runHostlist(hostlistOptions{delimiter: " "}, []string{"-", "stdin", "x"}, strings.NewReader("n1\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "n1,x\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestHostlistStdinTimeout: a stdin that never delivers is an error
// after FLUX_HOSTLIST_STDIN_TIMEOUT seconds, not a hang (flux-core).
func TestHostlistStdinTimeout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	t.Setenv("FLUX_HOSTLIST_STDIN_TIMEOUT", "0.05")
	var out strings.Builder
	if err := runHostlist(hostlistOptions{}, nil, r, &out); err == nil || !strings.Contains(err.Error(), "timeout after 0.05s waiting for stdin") {
		t.Fatalf("got %v", err)
	}
}
