package jobid

import (
	"errors"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0", "6731191091817518", "18446744073709551615", "18446744073709551616",
		"0x17e9fb8df16c2e", "0x", "0017.e9fb.8df1.6c2e", "0.0.0.0039",
		"job.0017.e9fb.8df1.6c2e", "reform-remote-galileo--heart-package-academy",
		"ƒuZZybuNNy", "fuZZybuNNy", "f", "ƒ", "😁👌", "🚹💗💧👗😷📷📚", " 0xffff ",
		"-1", "a-a-a--a-a-a", "\xf0\x9f", "f1230",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		for _, enc := range Encodings() {
			e, err := id.Encode(enc)
			if err != nil {
				t.Fatalf("Encode(%d, %s): %v", id, enc, err)
			}
			back, err := Parse(e)
			if err != nil || back != id {
				t.Fatalf("Parse(%q) accepted as %d, but %s form %q parses as %d, %v", s, id, enc, e, back, err)
			}
			if back, err := ParseAs(e, enc); err != nil || back != id {
				t.Fatalf("ParseAs(%q, %s) = %d, %v; want %d", e, enc, back, err, id)
			}
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	for _, v := range []uint64{0, 1, 57, 58, 1 << 32, 6731191091817518, 1<<64 - 1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v uint64) {
		id := ID(v)
		for _, enc := range Encodings() {
			e, err := id.Encode(enc)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := Parse(e); err != nil || back != id {
				t.Fatalf("Parse(Encode(%d, %s) = %q) = %d, %v", v, enc, e, back, err)
			}
		}
	})
}
