package jobspec

import (
	"encoding/json"
	"testing"
)

// TestFileEntry: text stays utf-8, anything else base64; a round trip
// through JSON (as the jobspec makes) gives the data and mode back; a
// non-regular entry is refused.
func TestFileEntry(t *testing.T) {
	for _, data := range []string{"#!/bin/sh\necho hi\n", "bin\xff\x00ary"} {
		e := FileEntry([]byte(data), 0o700)
		b, _ := json.Marshal(e)
		var back map[string]any
		json.Unmarshal(b, &back)
		got, mode, err := DecodeFileEntry(back)
		if err != nil || string(got) != data || mode != 0o700 {
			t.Fatalf("%q: got %q mode %o err %v (entry %s)", data, got, mode, err, b)
		}
		if back["mode"].(float64) != 0o100700 {
			t.Fatalf("mode %v", back["mode"])
		}
	}
	if _, _, err := DecodeFileEntry(map[string]any{"mode": float64(0o40755)}); err == nil {
		t.Error("a directory entry decoded as a file")
	}
	var js Jobspec
	if err := js.AddFile("a", FileEntry([]byte("x"), 0o600)); err != nil {
		t.Fatal(err)
	}
	js.AddFile("b", FileEntry([]byte("y"), 0o600))
	if f := js.Files(); len(f) != 2 || f["a"]["data"] != "x" {
		t.Errorf("Files: %v", f)
	}
}
