package cli

import (
	"strings"
	"testing"
)

// TestMultiProg: lines pick tasks by idset or "*", %t and %o substitute,
// quoting and comments follow the shell, and a task on two lines, a line
// without a command or a bad idset is an error naming the line.
func TestMultiProg(t *testing.T) {
	lines, err := parseMultiProg("# comment\n0-1 echo task %t\n\n2-3 echo %t.%o \"a b\" # tail\n* echo rest %t\n")
	if err != nil {
		t.Fatal(err)
	}
	for rank, want := range map[uint]string{0: "echo task 0", 1: "echo task 1", 2: "echo 2.0 a b", 3: "echo 3.1 a b", 7: "echo rest 7"} {
		argv, err := multiProgArgv(lines, rank)
		if err != nil || strings.Join(argv, " ") != want {
			t.Errorf("task %d: %q %v, want %q", rank, argv, err, want)
		}
	}
	if argv, err := multiProgArgv(lines[:2], 9); err == nil {
		t.Errorf("task on no line: %q", argv)
	}
	for text, want := range map[string]string{
		"0 a\n0-1 b\n": "line 2: task 0",
		"0\n":          "line 1: a task idset and a command",
		"x a\n":        "line 1: task idset",
		"* a\n* b\n":   "line 2: a second",
	} {
		if _, err := parseMultiProg(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
