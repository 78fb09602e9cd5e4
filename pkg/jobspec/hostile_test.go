package jobspec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// TestHostileJobspecs runs the corpus in testdata/hostile: each NAME.json
// must be refused with an error containing NAME.err (the key, the value
// and the rule or limit it breaks).
func TestHostileJobspecs(t *testing.T) {
	files, err := filepath.Glob("testdata/hostile/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".err")
			if err != nil {
				t.Fatal(err)
			}
			_, err = jobspec.Parse(data)
			if err == nil {
				t.Fatalf("accepted; want %q", strings.TrimSpace(string(want)))
			}
			if !strings.Contains(err.Error(), strings.TrimSpace(string(want))) {
				t.Fatalf("error %q\nwant it to contain %q", err, strings.TrimSpace(string(want)))
			}
		})
	}
}
