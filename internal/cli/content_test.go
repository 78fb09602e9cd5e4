package cli

import (
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
)

func TestReadContentBlobrefs(t *testing.T) {
	refs, err := readContentBlobrefs(strings.NewReader("sha1-a\n\n  sha1-b  \n"))
	if err != nil || strings.Join(refs, ",") != "sha1-a,sha1-b" {
		t.Fatalf("got %q, %v", refs, err)
	}
	if _, err := readContentBlobrefs(strings.NewReader("\n")); err == nil {
		t.Fatal("no blobrefs accepted")
	}
}

// TestContentCommand runs flux content against a real instance, as
// flux-content(1) describes it.
func TestContentCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real instance")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 2, Attrs: map[string]string{"statedir": t.TempDir()}})

	ref := strings.TrimSpace(contentRunOK(t, inst, "foo\n", "content", "store"))
	if ref != "sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec15" {
		t.Fatalf("store printed %q", ref)
	}
	if out := contentRunOK(t, inst, "", "content", "load", ref); out != "foo\n" {
		t.Fatalf("load printed %q", out)
	}

	// chunks: one blobref per chunk, loaded back in order
	refs := strings.Fields(contentRunOK(t, inst, "abcdefgh", "content", "store", "--chunksize=3"))
	if len(refs) != 3 {
		t.Fatalf("--chunksize=3 of 8 bytes printed %q", refs)
	}
	for _, r := range refs {
		if err := content.Validate(r); err != nil {
			t.Fatal(err)
		}
	}
	if out := contentRunOK(t, inst, "", append([]string{"content", "load"}, refs...)...); out != "abcdefgh" {
		t.Fatalf("load of chunks printed %q", out)
	}
	// blobrefs on stdin
	if out := contentRunOK(t, inst, strings.Join(refs, "\n")+"\n", "content", "load"); out != "abcdefgh" {
		t.Fatalf("load from stdin printed %q", out)
	}
	// empty input is one empty blob
	if r := strings.TrimSpace(contentRunOK(t, inst, "", "content", "store")); r != "sha1-da39a3ee5e6b4b0d3255bfef95601890afd80709" {
		t.Fatalf("empty store printed %q", r)
	}

	contentRunOK(t, inst, "", "content", "flush")
	contentRunOK(t, inst, "", "content", "dropcache")
	if out := contentRunOK(t, inst, "", "content", "load", "--bypass-cache", ref); out != "foo\n" {
		t.Fatalf("load --bypass-cache printed %q", out)
	}
	bref := strings.TrimSpace(contentRunOK(t, inst, "bar", "content", "store", "-b"))
	if out := contentRunOK(t, inst, "", "content", "load", bref); out != "bar" {
		t.Fatalf("load of a blob stored with -b printed %q", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"content", "load", "sha1-nothex"}, "invalid blobref"},
		{[]string{"content", "load", "sha1-0000000000000000000000000000000000000000"}, "sha1-0000000000000000000000000000000000000000: not found"},
		{[]string{"content", "store", "--chunksize=-1"}, "--chunksize=-1"},
		{[]string{"content", "flush", "extra"}, "unknown command"},
	} {
		res := inst.Run(t, tc.args...)
		if res.Code == 0 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("flux %s: exit %d, stderr %q; want failure mentioning %q", strings.Join(tc.args, " "), res.Code, res.Stderr, tc.want)
		}
	}
}

func contentRunOK(t *testing.T, inst *testinstance.Instance, stdin string, args ...string) string {
	t.Helper()
	res := inst.RunInput(t, stdin, args...)
	if res.Code != 0 {
		t.Fatalf("flux %s: exit %d\nstderr: %s", strings.Join(args, " "), res.Code, res.Stderr)
	}
	return res.Stdout
}
