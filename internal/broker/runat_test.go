package broker

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestInitialArgv(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	noexec := filepath.Join(dir, "data")
	os.WriteFile(noexec, []byte("x"), 0o644)
	t.Setenv("SHELL", "/bin/sh")
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"echo", "a b"}, []string{"echo", "a b"}}, // several words: as they are
		{[]string{exe}, []string{exe}},                     // an executable file
		{[]string{"sh"}, []string{"sh"}},                   // an interactive shell
		{[]string{"flux getattr size"}, []string{"/bin/sh", "-c", "flux getattr size"}},
		{[]string{"hostname"}, []string{"/bin/sh", "-c", "hostname"}}, // not a file here: the shell finds it
		{[]string{noexec}, []string{"/bin/sh", "-c", noexec}},
	} {
		if got := initialArgv(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("initialArgv(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPushCleanup(t *testing.T) {
	b := &Broker{}
	if err := b.pushCleanup("rc1", []string{"true"}); err == nil {
		t.Error("rc1 accepted")
	}
	if err := b.pushCleanup("cleanup", []string{""}); err == nil {
		t.Error("an empty command accepted")
	}
	many := make([]string, maxRunatCommands+1)
	for i := range many {
		many[i] = "true"
	}
	if err := b.pushCleanup("cleanup", many); err == nil {
		t.Errorf("%d commands accepted", len(many))
	}
	if err := b.pushCleanup("cleanup", []string{"a", "b"}); err != nil || !slices.Equal(b.cleanup, []string{"a", "b"}) {
		t.Errorf("push: %v, %q", err, b.cleanup)
	}
}
