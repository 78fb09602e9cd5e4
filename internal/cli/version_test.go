package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintVersion(t *testing.T) {
	var out bytes.Buffer
	if err := printVersion(&out, ""); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Contains(s, "broker:") || strings.Contains(s, "FLUX_URI:") ||
		!strings.HasPrefix(s, "commands:    \t\t") || !strings.Contains(s, "\nbuild-options:\t\t") {
		t.Errorf("without FLUX_URI:\n%s", s)
	}
	out.Reset()
	if err := printVersion(&out, "local:///nonexistent/flux"); err == nil || !strings.Contains(err.Error(), "local:///nonexistent/flux") {
		t.Errorf("unreachable FLUX_URI: %v, want an error naming it", err)
	}
}
