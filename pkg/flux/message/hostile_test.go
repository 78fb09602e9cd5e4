package message_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/flux/message/messagetest"
)

// TestHostileFrames: each stream in testdata/hostile fails to read with
// the error its file names (see testdata/hostile/README.md).
func TestHostileFrames(t *testing.T) {
	cases, err := messagetest.Hostile("testdata/hostile")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			m, err := message.NewReader(bytes.NewReader(c.Raw)).Read()
			if err == nil {
				t.Fatalf("read %v, want an error containing %q", m, c.Want)
			}
			if !strings.Contains(err.Error(), c.Want) {
				t.Fatalf("error %q, want it to contain %q", err, c.Want)
			}
		})
	}
}
