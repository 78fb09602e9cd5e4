// Package messagetest reads the codec's corpus of malformed message
// streams (pkg/flux/message/testdata/hostile), for the tests that feed
// them to the codec and to a running broker.
package messagetest

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Case is one corpus file: the raw stream and the error reading it must
// give.
type Case struct {
	Name string // the file name without .hex
	Raw  []byte
	Want string
}

// Hostile reads every DIR/*.hex file: lines starting with '#' are
// comments, "want: TEXT" is the expected error, the rest hex digits.
func Hostile(dir string) ([]Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.hex"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no .hex files in %s", dir)
	}
	var cases []Case
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		c := Case{Name: strings.TrimSuffix(filepath.Base(path), ".hex")}
		var digits strings.Builder
		for _, line := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "want:"):
				c.Want = strings.TrimSpace(strings.TrimPrefix(line, "want:"))
			default:
				digits.WriteString(strings.TrimSpace(line))
			}
		}
		if c.Raw, err = hex.DecodeString(digits.String()); err != nil || c.Want == "" {
			return nil, fmt.Errorf("%s: bad corpus file (hex: %v, want: %q)", path, err, c.Want)
		}
		cases = append(cases, c)
	}
	return cases, nil
}
