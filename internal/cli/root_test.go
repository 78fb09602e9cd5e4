package cli

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// The table's names must be the commands' names, or a command would be
// reached only through the whole tree.
func TestCommandTableNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commandTable {
		cmd := c.new()
		if cmd.Name() != c.name {
			t.Errorf("commandTable entry %q builds command %q", c.name, cmd.Name())
		}
		if seen[c.name] {
			t.Errorf("commandTable lists %q twice", c.name)
		}
		seen[c.name] = true
	}
}

// A named command gets a tree with only itself; anything else the whole
// tree, so help and suggestions still see every command.
func TestRootForArgs(t *testing.T) {
	var out bytes.Buffer
	if got := len(newRootFor([]string{"hostlist", "-c", "a[1-3]"}, nil, &out, &out).Commands()); got != 1 {
		t.Fatalf("tree for 'flux hostlist' has %d commands", got)
	}
	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"hostlis"}} {
		if got := len(newRootFor(args, nil, &out, &out).Commands()); got < len(commandTable) {
			t.Fatalf("tree for %q has %d commands", args, got)
		}
	}
	out.Reset()
	if code := Main([]string{"hostlist", "-c", "a[1-3]"}, nil, &out, &out); code != 0 || out.String() != "3\n" {
		t.Fatalf("flux hostlist -c: code %d, output %q", code, out.String())
	}
	out.Reset()
	if code := Main([]string{"hostlis"}, nil, &out, &out); code == 0 || !strings.Contains(out.String(), "hostlist") {
		t.Fatalf("mistyped command: code %d, output %q (want a suggestion)", code, out.String())
	}
	out.Reset()
	if code := Main([]string{"help", "run"}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "usage: flux-run") {
		t.Fatalf("flux help run: code %d, output %q", code, out.String())
	}
}

// A command group refuses an unknown subcommand, and without one prints
// its usage on stderr and fails, at any depth.
func TestCommandGroupsNeedSubcommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"kvs", "bogus"}, `flux-kvs: unknown command "bogus" for "flux kvs"`},
		{[]string{"kvs", "eventlog", "bogus"}, `flux-kvs: unknown command "bogus" for "flux kvs eventlog"`},
		{[]string{"queue"}, "  flux queue [command]"},
		{[]string{"kvs", "namespace"}, "  flux kvs namespace [command]"},
	} {
		var out, errw strings.Builder
		code := Main(tt.args, nil, &out, &errw)
		if code != 1 || !strings.Contains(errw.String(), tt.want) || out.Len() != 0 {
			t.Errorf("flux %s: exit %d, stdout %q, stderr %q; want exit 1 and %q on stderr",
				strings.Join(tt.args, " "), code, out.String(), errw.String(), tt.want)
		}
	}
}

// TestHelpUnknownTopic: flux help of an unknown command fails with a
// message naming it, instead of listing the commands and exiting 0.
func TestHelpUnknownTopic(t *testing.T) {
	_, haveMan := exec.LookPath("man")
	for _, args := range [][]string{{"help", "nosuch"}, {"help", "job", "nosuch"}} {
		var out, errb bytes.Buffer
		code := Main(args, nil, &out, &errb)
		if haveMan == nil {
			// flux-core shows man flux-CMD and exits as man does
			if code == 0 {
				t.Errorf("flux %v: exit 0, want man's failure", args)
			}
			continue
		}
		if code != 1 {
			t.Errorf("flux %v: exit %d, want 1", args, code)
		}
		if !strings.Contains(errb.String(), "flux-help: no help for") || out.Len() != 0 {
			t.Errorf("flux %v: stdout %q stderr %q", args, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"help", "version"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "Usage:") {
		t.Errorf("flux help version: exit %d, stdout %q", code, out.String())
	}
}

// TestColorArgs checks flux-core's attached -LWHEN is read as --color=WHEN
// only for the commands with that option, and never in a job's command.
func TestColorArgs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"dmesg -Lalways", "dmesg --color=always"},
		{"job eventlog -Lnever ƒ1", "job eventlog --color=never ƒ1"},
		{"resource list -Lauto", "resource list --color=auto"},
		{"run ls -Lalways", "run ls -Lalways"},
		{"job attach -Lalways", "job attach -Lalways"},
		{"dmesg -L", "dmesg -L"},
		{"overlay status -- -Lalways", "overlay status -- -Lalways"},
	} {
		if got := strings.Join(colorArgs(strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}
