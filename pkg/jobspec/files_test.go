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

// TestDecodeFileEntryJSONContent: an RFC 37 entry with data and no
// encoding is JSON content, written out as its JSON encoding (a
// flux-core jobspec's add_file of a dict), not dropped as an empty file.
func TestDecodeFileEntryJSONContent(t *testing.T) {
	var e map[string]any
	if err := json.Unmarshal([]byte(`{"mode":33188,"data":{"resource":{"exclude":"node<42>"}}}`), &e); err != nil {
		t.Fatal(err)
	}
	got, mode, err := DecodeFileEntry(e)
	if err != nil || string(got) != `{"resource":{"exclude":"node<42>"}}` || mode != 0o644 {
		t.Fatalf("got %q mode %o err %v", got, mode, err)
	}
	if got, _, err := DecodeFileEntry(map[string]any{"mode": float64(0o100644), "size": float64(0)}); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %q %v", got, err)
	}
	if _, _, err := DecodeFileEntry(map[string]any{"encoding": "base64", "data": float64(3)}); err == nil {
		t.Error("base64 entry with numeric data decoded")
	}
}
