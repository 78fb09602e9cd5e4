package wire

import (
	"strings"
	"testing"
)

func TestCheckPoolName(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "Batch_pool-2": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a b": false, "a/b": false, "é": false, "a.b": false,
	} {
		if err := CheckPoolName(name); (err == nil) != ok {
			t.Errorf("CheckPoolName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
