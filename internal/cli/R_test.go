package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// runR runs "flux R args..." with stdin and returns its output and exit
// status.
func runR(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(append([]string{"R"}, args...), strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// encodeR runs "flux R encode" once per argument list and concatenates
// the R objects, as "(flux R encode ... && flux R encode ...) |" does.
func encodeR(t *testing.T, argLists ...[]string) string {
	t.Helper()
	var sb strings.Builder
	for _, args := range argLists {
		out, errs, code := runR(t, "", append([]string{"encode"}, args...)...)
		if code != 0 {
			t.Fatalf("flux R encode %q: exit %d: %s", args, code, errs)
		}
		sb.WriteString(out)
	}
	return sb.String()
}

func a(args ...string) []string { return args }

func TestRCommand(t *testing.T) {
	localhost, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	props := a("--hosts=foo[0-1]", "--gpus", "0", "--cores", "0-1",
		"--property", "xx:0", "--property", "yy:1", "--property", "all")
	sched := `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}],"nodelist":["foo[0-3]"]},"scheduling":42}`

	tests := []struct {
		name    string
		pre     string     // stdin before the encode output
		encode  [][]string // encode runs whose output is stdin
		stdin   string     // appended to stdin after the encode output
		args    []string
		want    string // stdout; "" with code 0 means empty output
		code    int
		errWant string // substring of stderr
	}{
		{name: "decode empty input", args: a("decode"), code: 1, errWant: "flux-R: failed to read R on stdin: no R object found"},
		{name: "decode {}", stdin: "{}", args: a("decode"), code: 1, errWant: "flux-R: failed to read R on stdin: R object 1: version: missing"},
		{name: "decode version only", stdin: `{"version": 1}`, args: a("decode"), code: 1, errWant: "execution: missing"},
		{name: "decode empty execution", stdin: `{"version": 1, "execution": {}}`, args: a("decode"), code: 1, errWant: "execution.R_lite: missing"},
		{name: "decode empty R_lite", stdin: `{"version": 1, "execution": {"R_lite": []}}`, args: a("decode", "--count", "core"), want: "0\n"},

		{name: "encode defaults short", encode: [][]string{nil}, args: a("decode", "--short"), want: "rank0/core0\n"},
		{name: "encode defaults counts", encode: [][]string{nil}, args: a("decode", "-c", "node"), want: "1\n"},
		{name: "encode defaults gpus", encode: [][]string{nil}, args: a("decode", "--count", "gpu"), want: "0\n"},
		{name: "encode defaults host", encode: [][]string{nil}, args: a("decode", "--nodelist"), want: localhost + "\n"},
		{name: "encode --ranks 0-1", encode: [][]string{a("--ranks", "0-1")}, args: a("decode", "--count", "node"), want: "2\n"},
		{name: "encode --ranks 0,2 cores", encode: [][]string{a("--ranks", "0,2")}, args: a("decode", "--count", "core"), want: "2\n"},
		{name: "encode --ranks 0,2 ranks", encode: [][]string{a("--ranks", "0,2")}, args: a("decode", "--ranks"), want: "0,2\n"},
		{name: "encode --cores", encode: [][]string{a("--cores", "0-1")}, args: a("decode", "--count", "core"), want: "2\n"},
		{name: "encode -c -r", encode: [][]string{a("-c", "0-1", "-r", "0-1")}, args: a("decode", "-c", "core"), want: "4\n"},
		{name: "encode --gpus only", encode: [][]string{a("--gpus", "0")}, args: a("decode", "--short", "-c", "core"), want: "rank0/gpu0\n0\n"},
		{name: "encode cores and gpus", encode: [][]string{a("--cores", "0-1", "-g", "0")}, args: a("decode", "-c", "gpu"), want: "1\n"},
		{name: "encode --hosts", encode: [][]string{a("--hosts=foo[0-1]")}, args: a("decode", "-c", "node", "--nodelist"), want: "foo[0-1]\n2\n"},
		{name: "encode hosts mismatch", args: a("encode", "-r", "0-3", "-H", "foo[0-1]"), code: 1, errWant: "does not match the number of ranks"},
		{name: "encode bad cores", args: a("encode", "-c", "0-"), code: 1, errWant: `flux-R: invalid --cores "0-"`},
		{name: "encode property bad rank", args: a("encode", "-r", "0-3", "-p", "xx:3-5"), code: 1, errWant: "ranks 4-5 not found"},

		{name: "properties all", encode: [][]string{props}, args: a("decode", "-c", "node", "--properties", "all"), want: "2\n"},
		{name: "properties xx", encode: [][]string{props}, args: a("decode", "-c", "node", "--properties", "xx"), want: "1\n"},
		{name: "properties ^all", encode: [][]string{props}, args: a("decode", "-c", "node", "--properties", "^all"), want: "0\n"},
		{name: "properties all,yy", encode: [][]string{props}, args: a("decode", "-c", "node", "--properties", "all,yy"), want: "1\n"},
		{name: "properties nodelist xx", encode: [][]string{props}, args: a("decode", "--nodelist", "--properties", "xx"), want: "foo0\n"},
		{name: "properties nodelist ^yy", encode: [][]string{props}, args: a("decode", "--nodelist", "-p", "^yy"), want: "foo0\n"},
		{name: "properties bad name", encode: [][]string{props}, args: a("decode", "-p", "a|b"), code: 1, errWant: "invalid --properties"},

		{name: "decode --include", encode: [][]string{a("-r", "0-1023")}, args: a("decode", "--include", "5-7", "--short"), want: "rank[5-7]/core0\n"},
		{name: "decode --exclude", encode: [][]string{a("-r", "1-10")}, args: a("decode", "--exclude", "5-7", "--short"), want: "rank[1-4,8-10]/core0\n"},
		{name: "decode bad --count", encode: [][]string{nil}, args: a("decode", "--count", "socket"), code: 1, errWant: `unknown resource type "socket"`},
		{name: "decode unions inputs", encode: [][]string{a("-r", "0"), a("-r", "1", "-c", "1")}, args: a("decode", "-s"), want: "rank0/core0 rank1/core1\n"},

		{name: "append", encode: [][]string{a("-r", "0-1", "-c", "0-1"), a("-r", "1-2", "-c", "2-3")}, args: a("append"), want: "rank0/core[0-1] rank1/core[0-3] rank2/core[2-3]"},
		{name: "append some gpus", encode: [][]string{a("-r", "0-1", "-c", "0-1"), a("-r", "2-3", "-c", "0-1", "-g", "0-1")}, args: a("append"), want: "rank[0-1]/core[0-1] rank[2-3]/core[0-1],gpu[0-1]"},
		{name: "append overlap", encode: [][]string{a("-r", "0-1"), a("-r", "1-2")}, args: a("append"), code: 1, errWant: "flux-R: rank[0-1]/core0 and rank[1-2]/core0 share rank1/core0"},
		{name: "append gpu overlap", encode: [][]string{a("-r", "0-1", "-c", "0-1", "-g", "0"), a("-r", "1", "-c", "2-3", "-g", "0")}, args: a("append"), code: 1, errWant: "share rank1/gpu0"},
		{name: "diff", encode: [][]string{a("-r", "0-1", "-c", "0-1"), a("-r", "0-1", "-c", "0")}, args: a("diff"), want: "rank[0-1]/core1"},
		{name: "diff needs two", encode: [][]string{nil}, args: a("diff"), code: 1, errWant: "diff requires at least 2 resource sets"},
		{name: "intersect", encode: [][]string{a("-r", "0-3", "-c", "0-1"), a("-r", "1-5", "-c", "0")}, args: a("intersect"), want: "rank[1-3]/core0"},
		{name: "intersect disjoint", encode: [][]string{a("-r", "0-3", "-c", "0-1"), a("-r", "4-5", "-c", "0")}, args: a("intersect"), want: ""},
		{name: "remap", encode: [][]string{a("-r", "5,99,1000")}, args: a("remap"), want: "rank[0-2]/core0"},
		{name: "rerank", encode: [][]string{a("-r", "0-3", "-H", "foo[0-3]")}, args: a("rerank", "foo[3,2,1,0]"), want: "foo[3,2,1,0]"},
		{name: "rerank unknown host", encode: [][]string{a("-r", "0-1", "-H", "foo[0-1]")}, args: a("rerank", "foo[1-2]"), code: 1, errWant: "flux-R: host foo2 is not in the set"},
		{name: "rerank too few", encode: [][]string{a("-r", "0-1", "-H", "foo[0-1]")}, args: a("rerank", "foo1"), code: 1, errWant: "1 hosts given for 2 nodes"},
		{name: "rerank no arg", encode: [][]string{nil}, args: a("rerank"), code: 1, errWant: "rerank requires one HOSTLIST argument"},

		{name: "verify subset", encode: [][]string{a("-r", "1-10", "-c", "0-3"), a("-r", "1", "-c", "0-3")}, args: a("verify")},
		{name: "verify wrong rank", encode: [][]string{a("-r", "1-10", "-c", "0-3"), a("-r", "0", "-c", "0-3")}, args: a("verify"), code: 1, errWant: "flux-R: rank0 not in the expected set"},
		{name: "verify wrong host", encode: [][]string{a("-r", "1", "-c", "0-3", "-H", "foo1"), a("-r", "1", "-c", "0-3", "-H", "foo12")}, args: a("verify"), code: 1, errWant: "hostname is foo12, expected foo1"},
		{name: "verify missing core", encode: [][]string{a("-r", "1", "-c", "0-3"), a("-r", "1", "-c", "0-2")}, args: a("verify"), code: 1, errWant: "rank1 is missing core3"},
		{name: "verify extra", encode: [][]string{a("-r", "1", "-c", "0-3"), a("-r", "1", "-c", "0-7", "-g", "1")}, args: a("verify"), errWant: "flux-R: extra resources: rank1/core[4-7],gpu1"},
		{name: "verify needs two", encode: [][]string{nil}, args: a("verify"), code: 1, errWant: "verify requires exactly 2 R objects"},

		{name: "set-property unknown ranks", encode: [][]string{a("-r", "0-1")}, args: a("set-property", "foo:1-2"), code: 1, errWant: "ranks 2 not found"},
		{name: "set-property no args", encode: [][]string{nil}, args: a("set-property"), code: 1, errWant: "requires at least one"},

		{name: "scheduling kept by decode", stdin: sched, args: a("decode"), want: "scheduling=42"},
		{name: "scheduling kept by --include", stdin: sched, args: a("decode", "--include", "0"), want: "scheduling=42"},
		{name: "scheduling kept by --exclude", stdin: sched, args: a("decode", "--exclude", "0"), want: "scheduling=42"},
		{name: "scheduling kept by remap", stdin: sched, args: a("remap"), want: "scheduling=42"},
		{name: "scheduling kept by append", encode: [][]string{a("-r", "4", "-H", "foo4")}, pre: sched, args: a("append"), want: "scheduling=42"},
		{name: "scheduling kept by diff", encode: [][]string{a("-r", "1", "-H", "foo1")}, pre: sched, args: a("diff"), want: "scheduling=42"},

		{name: "no subcommand", args: nil, code: 1},
		{name: "unknown subcommand", args: a("bogus"), code: 1, errWant: `flux-R: unknown subcommand "bogus"`},
		{name: "unknown flag", args: a("decode", "--bogus"), code: 1, errWant: "flux-R: unknown flag: --bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin := tt.pre + encodeR(t, tt.encode...) + tt.stdin
			out, errs, code := runR(t, stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, errs)
			}
			if !strings.Contains(errs, tt.errWant) {
				t.Errorf("stderr = %q, want it to contain %q", errs, tt.errWant)
			}
			if tt.code != 0 {
				if tt.errWant != "" && !strings.HasPrefix(errs, "flux-R: ") {
					t.Errorf("stderr = %q, want a flux-R: message", errs)
				}
				return
			}
			got := out
			// Commands that print R are checked through decode --short,
			// --nodelist or the scheduling key, as the sharness tests do.
			switch {
			case strings.HasPrefix(tt.want, "scheduling="):
				var doc map[string]json.RawMessage
				if err := json.Unmarshal([]byte(out), &doc); err != nil {
					t.Fatalf("output is not JSON: %v\n%s", err, out)
				}
				got = "scheduling=" + string(doc["scheduling"])
			case tt.args[0] == "rerank":
				got, _, _ = runR(t, out, "decode", "--nodelist")
				got = strings.TrimSuffix(got, "\n")
			case tt.args[0] != "decode" && tt.args[0] != "verify":
				got, _, _ = runR(t, out, "decode", "--short")
				got = strings.TrimSuffix(got, "\n")
			}
			if got != tt.want {
				t.Errorf("output = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRSetProperty(t *testing.T) {
	in := encodeR(t, a("-r", "0-1", "-c", "0-3", "-H", "foo[0-1]"))
	out, errs, code := runR(t, in, "set-property", "all")
	if code != 0 {
		t.Fatalf("set-property all: %s", errs)
	}
	out, errs, code = runR(t, out, "set-property", "xx:0", "yy:1")
	if code != 0 {
		t.Fatalf("set-property xx:0 yy:1: %s", errs)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{a("-c", "node"), "2"},
		{a("-c", "node", "--properties", "all"), "2"},
		{a("-c", "node", "--properties", "xx"), "1"},
		{a("-c", "node", "--properties", "yy"), "1"},
		{a("-c", "node", "--properties", "^all"), "0"},
		{a("-c", "node", "--properties", "all,yy"), "1"},
		{a("--nodelist", "--properties", "xx"), "foo0"},
		{a("--nodelist", "--properties", "yy"), "foo1"},
		{a("--nodelist", "--properties", "^yy"), "foo0"},
	} {
		got, errs, code := runR(t, out, append([]string{"decode"}, tt.args...)...)
		if code != 0 || strings.TrimSpace(got) != tt.want {
			t.Errorf("decode %q = %q (exit %d, %s), want %q", tt.args, got, code, errs, tt.want)
		}
	}
}

// TestREncodeOutput pins the exact document encode writes.
func TestREncodeOutput(t *testing.T) {
	out := encodeR(t, a("-r", "0-3", "-c", "0-3", "-g", "0", "-H", "node[0-3]", "-p", "debug:0-1"))
	want := `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}],"starttime":0,"expiration":0,"nodelist":["node[0-3]"],"properties":{"debug":"0-1"}}}` + "\n"
	if out != want {
		t.Errorf("encode =\n%s\nwant\n%s", out, want)
	}
}
