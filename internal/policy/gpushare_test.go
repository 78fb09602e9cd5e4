package policy

import (
	"strings"
	"testing"
)

// TestQueueGPUShare: queues.NAME.gpu-share is read per queue (0: not
// set) and a value that is not an integer from 1 to 64 is refused
// naming the key and the value.
func TestQueueGPUShare(t *testing.T) {
	c, err := Parse([]byte(`{"queues": {"ml": {"requires": ["ml"], "gpu-share": 4}, "batch": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Queues["ml"].GPUShare != 4 || c.Queues["batch"].GPUShare != 0 {
		t.Errorf("gpu-share: ml %d, batch %d; want 4 and 0", c.Queues["ml"].GPUShare, c.Queues["batch"].GPUShare)
	}
	for _, bad := range []string{`0`, `65`, `1.5`, `"2"`, `true`} {
		_, err := Parse([]byte(`{"queues": {"ml": {"gpu-share": ` + bad + `}}}`))
		want := "queues.ml.gpu-share must be an integer from 1 (not shared) to 64, not " + bad
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("gpu-share %s: %v, want %q", bad, err, want)
		}
	}
}
