package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestArchiveSize: --chunksize and --small-file-threshold take a number
// with an optional k/K/M/G suffix, up to INT_MAX; anything else is an
// error naming the option.
func TestArchiveSize(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1024": 1024, "1k": 1024, "1K": 1024, "1M": 1 << 20, "1.5M": 3 << 19, "1G": 1 << 30, "0.5": 0} {
		if got, err := parseArchiveSize("chunksize", s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "x", "1X", "-1", "2G", "NaN", "1e10", "K"} {
		if _, err := parseArchiveSize("chunksize", s); err == nil || !strings.HasPrefix(err.Error(), "--chunksize="+s+": ") {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// TestArchiveInHelp: flux help lists flux archive, and flux archive lists
// its subcommands.
func TestArchiveInHelp(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"help"}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "archive     Flux KVS file archive utility") {
		t.Errorf("flux help (%d):\n%s", code, out.String())
	}
	out.Reset()
	Main([]string{"help", "archive"}, nil, &out, &out)
	for _, sub := range []string{"create", "extract", "list", "remove"} {
		if !strings.Contains(out.String(), "  "+sub+" ") {
			t.Errorf("flux help archive does not list %s:\n%s", sub, out.String())
		}
	}
}
