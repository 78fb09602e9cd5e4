package cli

import (
	"bytes"
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
	if code := Main([]string{"help", "run"}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "flux run") {
		t.Fatalf("flux help run: code %d, output %q", code, out.String())
	}
}
