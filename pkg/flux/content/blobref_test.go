package content

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
)

func TestBlobref(t *testing.T) {
	tests := []struct {
		hash string
		data string
		want string
	}{
		// digests from sha1sum / sha256sum
		{"sha1", "", "sha1-da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{"sha1", "foo\n", "sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec15"},
		{"sha256", "", "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tc := range tests {
		t.Run(tc.hash+"/"+tc.data, func(t *testing.T) {
			got, err := Blobref(tc.hash, []byte(tc.data))
			if err != nil || got != tc.want {
				t.Fatalf("Blobref = %q, %v; want %q", got, err, tc.want)
			}
			name, digest, err := Parse(got)
			if err != nil || name != tc.hash {
				t.Fatalf("Parse = %q, %v", name, err)
			}
			sum, _ := Sum(tc.hash, []byte(tc.data))
			if !bytes.Equal(digest, sum) {
				t.Fatal("Parse digest differs from Sum")
			}
			if n, _ := HashOfDigestSize(len(digest)); n != tc.hash {
				t.Fatalf("HashOfDigestSize = %q", n)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	good := "sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec15"
	for _, ref := range []string{
		"",
		"sha1",
		"sha1-",
		"sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec1",   // short
		"sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec155", // long
		"sha1-F1D2D2F924E986AC86FDF7B36C94BCDF32BEEC15",  // upper case
		"sha1-g1d2d2f924e986ac86fdf7b36c94bcdf32beec15",  // not hex
		"sha1_f1d2d2f924e986ac86fdf7b36c94bcdf32beec15",  // separator
		"md5-d41d8cd98f00b204e9800998ecf8427e",
		"sha256-f1d2d2f924e986ac86fdf7b36c94bcdf32beec15", // sha1-size digest
		" " + good,
		good + "\n",
		good + "\x00",
	} {
		t.Run(ref, func(t *testing.T) {
			_, _, err := Parse(ref)
			if !errors.Is(err, ErrBlobref) || !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("Parse(%q) = %v, want ErrBlobref", ref, err)
			}
		})
	}
}

func TestFormatRejects(t *testing.T) {
	if _, err := Format("sha1", make([]byte, 19)); !errors.Is(err, ErrBlobref) {
		t.Fatalf("short digest: %v", err)
	}
	if _, err := Format("md5", make([]byte, 16)); !errors.Is(err, ErrHash) {
		t.Fatalf("unknown hash: %v", err)
	}
	if _, err := HashOfDigestSize(16); err == nil {
		t.Fatal("16-byte digest named")
	}
}

func TestCheckpointValidate(t *testing.T) {
	ref := "sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec15"
	for _, c := range []Checkpoint{
		{Version: 2, Rootref: ref},
		{Version: 1, Rootref: "nope"},
		{Version: 1, Rootref: ref, Sequence: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (Checkpoint{Version: 1, Rootref: ref, Sequence: 3, Timestamp: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec15")
	f.Add("sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	f.Add("sha1-")
	f.Add("sha256-E3B0")
	f.Fuzz(func(t *testing.T, ref string) {
		name, digest, err := Parse(ref)
		if err != nil {
			return
		}
		// anything accepted formats back to itself
		again, err := Format(name, digest)
		if err != nil || again != ref {
			t.Fatalf("Parse(%q) then Format = %q, %v", ref, again, err)
		}
		if !strings.HasPrefix(ref, name+"-") {
			t.Fatalf("name %q is not the prefix of %q", name, ref)
		}
	})
}
