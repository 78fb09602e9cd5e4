package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestBulkInputs(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stdin  string
		tmpl   string
		inputs string
	}{
		{"one group", []string{"echo", "{}", ":::", "a", "b"}, "", "echo {}", "a|b"},
		{"product", []string{"echo", ":::", "1", "2", ":::", "3", "4"}, "", "echo", "1 3|1 4|2 3|2 4"},
		{"linked", []string{"echo", ":::", "1", "2", ":::+", "3", "4"}, "", "echo", "1 3|2 4"},
		{"linked cycles", []string{"echo", ":::", "1", "2", "3", ":::+", "x"}, "", "echo", "1 x|2 x|3 x"},
		{"stdin", []string{"echo", "{}"}, "a\n\nb\n", "echo {}", "a|b"},
		{"stdin as a file", []string{"echo", ":::", "1", "::::", "-"}, "a\nb\n", "echo", "1 a|1 b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, inputs, err := bulkInputs(c.args, strings.NewReader(c.stdin))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, in := range inputs {
				got = append(got, strings.Join(in, " "))
			}
			if strings.Join(tmpl, " ") != c.tmpl || strings.Join(got, "|") != c.inputs {
				t.Fatalf("template %q inputs %q, want %q %q", tmpl, got, c.tmpl, c.inputs)
			}
		})
	}
}

func TestSubstituteBulk(t *testing.T) {
	cases := []struct {
		word  string
		input []string
		seq   int
		want  string
	}{
		{"{}", []string{"a"}, 0, "a"},
		{"--job-name={}", []string{"x"}, 0, "--job-name=x"},
		{"{1}-{0}", []string{"a", "b"}, 0, "b-a"},
		{"{seq}/{seq1}", []string{"a"}, 4, "4/5"},
		{"{.%}", []string{"dir/file.txt"}, 0, "dir/file"},
		{"{./}", []string{"dir/file.txt"}, 0, "file.txt"},
		{"{./%}", []string{"dir/file.txt"}, 0, "file"},
		{"{.//}", []string{"dir/file.txt"}, 0, "dir"},
		{"{1./}", []string{"a", "d/e"}, 0, "e"},
		{"{5}", []string{"a"}, 0, "{5}"},
		{"plain", []string{"a"}, 0, "plain"},
	}
	for _, c := range cases {
		if got := substituteBulk([]string{c.word}, c.input, " ", c.seq)[0]; got != c.want {
			t.Errorf("substitute %q with %q: %q, want %q", c.word, c.input, got, c.want)
		}
	}
}

func TestBulksubmitDryRun(t *testing.T) {
	var out, errb bytes.Buffer
	err := runBulksubmit([]string{"--dry-run", "--job-name={}", "-n", "{seq1}", "hostname", ":::", "a", "b"}, strings.NewReader(""), &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	want := "bulksubmit: submit --job-name=a -n 1 hostname\nbulksubmit: submit --job-name=b -n 2 hostname\n"
	if out.String() != want {
		t.Fatalf("dry run:\n%s\nwant:\n%s", out.String(), want)
	}
}
