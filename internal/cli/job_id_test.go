package cli

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// runJobCLI runs the flux command line with args and stdin. Other
// flux job subcommand tests use it too.
func runJobCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

func TestJobIDCommand(t *testing.T) {
	const (
		dec   = "6731191091817518"
		f58   = "ƒuZZybuNNy"
		words = "reform-remote-galileo--heart-package-academy"
	)
	tests := []struct {
		name    string
		args    []string
		stdin   string
		env     string // FLUX_F58_FORCE_ASCII value, "" to leave unset
		want    string
		code    int
		errWant string
	}{
		{name: "default to dec", args: []string{f58}, want: dec + "\n"},
		{name: "to f58", args: []string{"--to=f58", dec}, want: f58 + "\n"},
		{name: "short option", args: []string{"-t", "hex", words}, want: "0x17e9fb8df16c2e\n"},
		{name: "to dothex", args: []string{"--to=dothex", dec}, want: "0017.e9fb.8df1.6c2e\n"},
		{name: "to kvs", args: []string{"--to=kvs", dec}, want: "job.0017.e9fb.8df1.6c2e\n"},
		{name: "to words", args: []string{"--to=words", "0x17e9fb8df16c2e"}, want: words + "\n"},
		{name: "to f58plain", args: []string{"--to=f58plain", dec}, want: "fuZZybuNNy\n"},
		{name: "to emoji", args: []string{"--to=emoji", "1234"}, want: "😁👌\n"},
		{name: "encoding name case", args: []string{"--to=HEX", "255"}, want: "0xff\n"},
		{name: "ascii f58 env", args: []string{"--to=f58", dec}, env: "1", want: "fuZZybuNNy\n"},
		{name: "several ids", args: []string{"--to=f58", "0", "1", "57"}, want: "ƒ1\nƒ2\nƒz\n"},
		{name: "kvs back", args: []string{"job.0017.e9fb.8df1.6c2e"}, want: dec + "\n"},
		{name: "stdin", stdin: "ƒ1\n 0x10 \njob.0000.0000.0000.0001\n", want: "0\n16\n1\n"},
		{name: "stdin no final newline", stdin: "fz", want: "57\n"},
		{name: "stdin ignored with args", args: []string{"3"}, stdin: "bogus\n", want: "3\n"},
		{name: "from restricts", args: []string{"--from=hex", "0x10"}, want: "16\n"},
		{name: "from kvs", args: []string{"--from=kvs", "--to=f58", "job.0017.e9fb.8df1.6c2e"}, want: f58 + "\n"},
		{
			name: "bad id", args: []string{"xyz"}, code: 1,
			errWant: `flux-job: id: invalid jobid "xyz": decimal encoding has non-digit 'x'`,
		},
		{
			name: "stops at bad id", args: []string{"1", "bogus-id", "2"}, want: "1\n", code: 1,
			errWant: `flux-job: id: invalid jobid "bogus-id"`,
		},
		{
			name: "bad id on stdin", stdin: "1\n\n2\n", want: "1\n", code: 1,
			errWant: `flux-job: id: invalid jobid "": empty string`,
		},
		{
			name: "from mismatch", args: []string{"--from=dec", "0x10"}, code: 1,
			errWant: `flux-job: id: invalid jobid "0x10"`,
		},
		{
			name: "unknown to", args: []string{"--to=octal", "1"}, code: 1,
			errWant: `flux-job: id: unknown jobid encoding "octal"`,
		},
		{
			name: "unknown from", args: []string{"--from=octal", "1"}, code: 1,
			errWant: `flux-job: id: --from: unknown jobid encoding "octal"`,
		},
		{name: "no input", stdin: "", code: 1, errWant: "flux-job: id: no job IDs"},
		{name: "bad option", args: []string{"--bogus", "1"}, code: 1, errWant: "flux-job: id: unknown flag: --bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FLUX_F58_FORCE_ASCII", tt.env)
			if tt.env == "" {
				os.Unsetenv("FLUX_F58_FORCE_ASCII") // restored by t.Setenv
			}
			out, errs, code := runJobCLI(t, tt.stdin, append([]string{"job", "id"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.code, errs)
			}
			if out != tt.want {
				t.Errorf("stdout = %q, want %q", out, tt.want)
			}
			if tt.errWant == "" && errs != "" {
				t.Errorf("unexpected stderr %q", errs)
			}
			if tt.errWant != "" && !strings.Contains(errs, tt.errWant) {
				t.Errorf("stderr = %q, want it to contain %q", errs, tt.errWant)
			}
		})
	}
}

func TestJobIDLogic(t *testing.T) {
	var out bytes.Buffer
	err := jobID(nil, strings.NewReader("ƒjpXCZedGfVQ\n"), &out, jobIDOptions{to: jobid.Hex})
	if err != nil || out.String() != "0xffffffffffffffff\n" {
		t.Fatalf("jobID = %q, %v", out.String(), err)
	}
	out.Reset()
	err = jobID([]string{"x"}, nil, &out, jobIDOptions{})
	if !errors.Is(err, jobid.ErrInvalid) {
		t.Errorf("jobID(x) error = %v, want jobid.ErrInvalid", err)
	}
	boom := errors.New("boom")
	err = jobID(nil, iotest.ErrReader(boom), &out, jobIDOptions{})
	if !errors.Is(err, boom) {
		t.Errorf("jobID with failing stdin = %v", err)
	}
}

func TestJobCommand(t *testing.T) {
	_, errs, code := runJobCLI(t, "", "job")
	if code != 1 || !strings.Contains(errs, "id") {
		t.Errorf("flux job: code %d, stderr %q; want usage listing id", code, errs)
	}
	_, errs, code = runJobCLI(t, "", "job", "frobnicate")
	if code != 1 || !strings.Contains(errs, `flux-job: unknown subcommand "frobnicate"`) {
		t.Errorf("flux job frobnicate: code %d, stderr %q", code, errs)
	}
	out, _, code := runJobCLI(t, "", "job", "id", "--help")
	if code != 0 || !strings.Contains(out, "--to") {
		t.Errorf("flux job id --help: code %d, out %q", code, out)
	}
}
