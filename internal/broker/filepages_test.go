package broker

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	maps := `00400000-00f95000 r-xp 00000000 fe:00 10274873                           /work/bin/flux
00f95000-01b20000 r--p 00b95000 fe:00 10274873                           /work/bin/flux
01b20000-01bce000 rw-p 01720000 fe:00 10274873                           /work/bin/flux
01bce000-03c20000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 fe:00 1 /work/bin/flux two
7f0000002000-7f0000003000 r-xp 00000000 fe:00 2 /usr/lib/other.so
7f0000004000-7f0000005000 r-xp 00000000 fe:00 3 /work/bin/flux (deleted)
zzzz-0001 r-xp 00000000 fe:00 3 /work/bin/flux
00005000-00004000 r-xp 00000000 fe:00 3 /work/bin/flux
`
	got := readOnlyMappings([]byte(maps), "/work/bin/flux")
	want := [][2]uintptr{{0x400000, 0xf95000}, {0xf95000, 0x1b20000}, {0x7f0000004000, 0x7f0000005000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("mapping %d: got %x, want %x", i, got[i], want[i])
		}
	}
	if got := readOnlyMappings([]byte(maps), "/work/bin/flux two"); len(got) != 1 {
		t.Fatalf("a path with a space: %x", got)
	}
}

func FuzzReadOnlyMappings(f *testing.F) {
	f.Add([]byte("00400000-00f95000 r-xp 00000000 fe:00 1 /x\n"), "/x")
	f.Add([]byte("-\n r\n1-2 rw /x\n"), "/x")
	f.Fuzz(func(t *testing.T, maps []byte, path string) {
		for _, r := range readOnlyMappings(maps, path) {
			if r[1] <= r[0] {
				t.Fatalf("empty or inverted range %x", r)
			}
		}
	})
}

// rssFile is this process's resident file pages in KiB.
func rssFile(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// The test binary drops its read-only pages and runs on (what it runs
// faults back in).
func TestReleaseBinaryPages(t *testing.T) {
	before := rssFile(t)
	n := releaseBinaryPages()
	after := rssFile(t)
	t.Logf("advised %d KiB; resident file pages %d KiB before, %d KiB after", n>>10, before, after)
	if n == 0 {
		t.Fatal("no read-only mapping of the executable was advised")
	}
	// still runs: code and read-only data come back
	if s := strconv.Itoa(12345); s != "12345" {
		t.Fatalf("after the release: %q", s)
	}
}
