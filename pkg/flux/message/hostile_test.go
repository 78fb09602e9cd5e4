package message

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileFrames: each stream in testdata/hostile fails to read with
// the error its file names (see testdata/hostile/README.md).
func TestHostileFrames(t *testing.T) {
	files, _ := filepath.Glob("testdata/hostile/*.hex")
	if len(files) == 0 {
		t.Fatal("no hostile frames in testdata/hostile")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".hex"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want string
			var digits strings.Builder
			for _, line := range strings.Split(string(data), "\n") {
				switch {
				case strings.HasPrefix(line, "#"):
				case strings.HasPrefix(line, "want:"):
					want = strings.TrimSpace(strings.TrimPrefix(line, "want:"))
				default:
					digits.WriteString(strings.TrimSpace(line))
				}
			}
			raw, err := hex.DecodeString(digits.String())
			if err != nil || want == "" {
				t.Fatalf("%s: bad corpus file (hex: %v, want: %q)", path, err, want)
			}
			m, err := NewReader(bytes.NewReader(raw)).Read()
			if err == nil {
				t.Fatalf("read %v, want an error containing %q", m, want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q, want it to contain %q", err, want)
			}
		})
	}
}
