package builtin

import "testing"

func TestLocalName(t *testing.T) {
	for s, ok := range map[string]bool{"alice": true, "a.b_c+d-e9": true, "": false, "a b": false, "a@b": false, "a\n": false} {
		if localName(s) != ok {
			t.Errorf("localName(%q) = %v, want %v", s, !ok, ok)
		}
	}
}
