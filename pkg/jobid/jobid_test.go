package jobid

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Vectors: RFC 19's examples plus id/string pairs that flux-core's FLUID
// tests check.
var encodeVectors = []struct {
	id     ID
	f58    string
	hex    string
	dothex string
	emoji  string
}{
	{0, "ƒ1", "0x0", "0000.0000.0000.0000", "😃"},
	{1, "ƒ2", "0x1", "0000.0000.0000.0001", "😄"},
	{57, "ƒz", "0x39", "0000.0000.0000.0039", "🙊"},
	{1234, "ƒNH", "0x4d2", "0000.0000.0000.04d2", "😁👌"},
	{1888, "ƒZZ", "0x760", "0000.0000.0000.0760", "😆🐻"},
	{3363, "ƒzz", "0xd23", "0000.0000.0000.0d23", ""},
	{3364, "ƒ211", "0xd24", "0000.0000.0000.0d24", ""},
	{4369, "ƒ2JL", "0x1111", "0000.0000.0000.1111", "😊🌀"},
	{65535, "ƒLUv", "0xffff", "0000.0000.0000.ffff", "💁📚"},
	{4294967295, "ƒ7YXq9G", "0xffffffff", "0000.0000.ffff.ffff", "😳🏪🍖🍸"},
	{633528662, "ƒxyzzy", "0x25c2e156", "0000.0000.25c2.e156", ""},
	{6731191091817518, "ƒuZZybuNNy", "0x17e9fb8df16c2e", "0017.e9fb.8df1.6c2e", ""},
	{0xedaf97d000000, "", "0xedaf97d000000", "000e.daf9.7d00.0000", ""},
	{math.MaxUint64 - 1, "ƒjpXCZedGfVP", "0xfffffffffffffffe", "ffff.ffff.ffff.fffe", ""},
	{math.MaxUint64, "ƒjpXCZedGfVQ", "0xffffffffffffffff", "ffff.ffff.ffff.ffff", "🚹💗💧👗😷📷📚"},
}

func TestEncodeVectors(t *testing.T) {
	for _, v := range encodeVectors {
		t.Run(v.hex, func(t *testing.T) {
			check := func(enc, want string) {
				t.Helper()
				if want == "" {
					return
				}
				got, err := v.id.Encode(enc)
				if err != nil {
					t.Fatalf("Encode(%s): %v", enc, err)
				}
				if got != want {
					t.Errorf("Encode(%s) = %q, want %q", enc, got, want)
				}
				back, err := Parse(want)
				if err != nil || back != v.id {
					t.Errorf("Parse(%q) = %d, %v; want %d", want, back, err, v.id)
				}
			}
			check(F58, v.f58)
			check(Hex, v.hex)
			check(DotHex, v.dothex)
			check(KVS, "job."+v.dothex)
			check(Emoji, v.emoji)
			if v.f58 != "" {
				check(F58Plain, "f"+strings.TrimPrefix(v.f58, "ƒ"))
				if got := v.id.String(); got != v.f58 {
					t.Errorf("String() = %q, want %q", got, v.f58)
				}
			}
		})
	}
}

func TestWordsVector(t *testing.T) {
	const id ID = 6731191091817518
	const words = "reform-remote-galileo--heart-package-academy"
	got, err := id.Encode(Words)
	if err != nil || got != words {
		t.Fatalf("Encode(words) = %q, %v; want %q", got, err, words)
	}
	for _, in := range []string{words, strings.ToUpper(words), " " + words + "\n"} {
		if back, err := Parse(in); err != nil || back != id {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, back, err, id)
		}
	}
	if n := len(mnList()); n != 1633 {
		t.Errorf("word list has %d words, want 1633", n)
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		in   string
		want ID
	}{
		{"f1", 0},
		{"f111", 0},
		{"fxyzzy", 633528662},
		{"1234", 1234},
		{"18446744073709551615", math.MaxUint64},
		{"0x0", 0},
		{"0xFFFF", 65535},
		{"0.0.0.0", 0},
		{"0.0.0.0039", 57},
		{"0.0.0.ffff", 65535},
		{"job.0017.e9fb.8df1.6c2e", 6731191091817518},
		{" 0xffff   ", 65535},
		{"\t\u0192uZZybuNNy\n", 6731191091817518},
		{"007", 7},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		in, why string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"boo", "non-digit"},
		{"f", "no digits"},
		{"ƒ", "no digits"},
		{"flux", "base58 alphabet"},
		{"f1230", "base58 alphabet"},
		{"fjpXCZedGfVR", "exceeds 64 bits"},
		{"x1", "non-digit"},
		{"-1", "two groups"},
		{"+1", "non-digit"},
		{"1.5", "want 4"},
		{"18446744073709551616", "exceeds 64 bits"},
		{"0x", "no digits"},
		{"0x1ffffffffffffffff", "exceeds 64 bits"},
		{"0xg", "non-hex"},
		{"0.0.0", "3 groups"},
		{"0.0.0.0.0", "more than 4"},
		{"0.0..0", "1 to 4"},
		{"00000.0.0.0", "1 to 4"},
		{"0.0.0.x", "non-hex"},
		{"job.1234", "1 groups"},
		{"a-a-a--a-a-a", "not a mnemonicode word"},
		{"academy-academy--academy-academy-academy", "three words"},
		{"academy-academy-academy-academy-academy-academy", "two groups"},
		{"academy-academy-yes--academy-academy-academy", "not a mnemonicode word"},
		{"academy-academy-amen--academy-academy-academy", "beyond 32 bits"},
		{"bogus\xf0\x9f", "non-digit"},
		{"\xf0\x9f\x98", "emoji table"},
		{"😃x", "emoji table"},
		{"🚹💗💧👗😷📷📛", "exceeds 64 bits"},
		{"😃😃😃😃😃😃😃😃😄", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id, err := Parse(tt.in)
			if tt.why == "" {
				if err != nil {
					t.Fatalf("Parse(%q) failed: %v", tt.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse(%q) = %d, want error", tt.in, id)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not mention %q", err, tt.why)
			}
		})
	}
}

func TestParseAs(t *testing.T) {
	const id ID = 6731191091817518
	for _, enc := range Encodings() {
		s, err := id.Encode(enc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseAs(s, strings.ToUpper(enc))
		if err != nil || got != id {
			t.Errorf("ParseAs(%q, %s) = %d, %v", s, enc, got, err)
		}
	}
	rejects := []struct{ in, enc string }{
		{"0x17e9fb8df16c2e", Dec},
		{"1234", F58},
		{"aaa", F58},
		{"1234", Hex},
		{"0017.e9fb.8df1.6c2e", KVS},
		{"job.0017.e9fb.8df1.6c2e", DotHex},
		{"bogus", Emoji},
		{"bogus", Words},
	}
	for _, r := range rejects {
		if got, err := ParseAs(r.in, r.enc); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAs(%q, %s) = %d, %v; want ErrInvalid", r.in, r.enc, got, err)
		}
	}
	if _, err := ParseAs("1", "base64"); !errors.Is(err, ErrUnknownEncoding) {
		t.Errorf("ParseAs with unknown encoding: %v", err)
	}
}

func TestEncodeUnknown(t *testing.T) {
	_, err := ID(1).Encode("octal")
	if !errors.Is(err, ErrUnknownEncoding) {
		t.Fatalf("Encode(octal) error = %v, want ErrUnknownEncoding", err)
	}
	if s, err := ID(255).Encode("HEX"); err != nil || s != "0xff" {
		t.Errorf("Encode(HEX) = %q, %v", s, err)
	}
}

func TestRoundTripAllEncodings(t *testing.T) {
	ids := []ID{0, 1, 57, 58, 575, 576, 1625, 1626, 1 << 32, 1<<32 - 1, 6731191091817518, math.MaxUint64}
	for x := uint64(1); x < math.MaxUint64/7; x *= 7 {
		ids = append(ids, ID(x), ID(x-1), ID(x+1))
	}
	for _, id := range ids {
		for _, enc := range Encodings() {
			s, err := id.Encode(enc)
			if err != nil {
				t.Fatalf("Encode(%d, %s): %v", id, enc, err)
			}
			if got, err := Parse(s); err != nil || got != id {
				t.Errorf("Parse(Encode(%d, %s) = %q) = %d, %v", id, enc, s, got, err)
			}
		}
	}
}

func TestFields(t *testing.T) {
	id, err := New(MaxTimestamp, MaxGenerator, MaxSequence)
	if err != nil || id != math.MaxUint64 {
		t.Fatalf("New(max...) = %d, %v", id, err)
	}
	id, err = New(123456, 42, 7)
	if err != nil {
		t.Fatal(err)
	}
	if id.Timestamp() != 123456 || id.Generator() != 42 || id.Sequence() != 7 {
		t.Errorf("fields of %d = %d, %d, %d", id, id.Timestamp(), id.Generator(), id.Sequence())
	}
	for _, bad := range [][3]uint64{{MaxTimestamp + 1, 0, 0}, {0, MaxGenerator + 1, 0}, {0, 0, MaxSequence + 1}} {
		if _, err := New(bad[0], uint16(bad[1]), uint16(bad[2])); !errors.Is(err, ErrGenerator) {
			t.Errorf("New(%v) error = %v, want ErrGenerator", bad, err)
		}
	}
}

func TestJSON(t *testing.T) {
	type msg struct {
		ID ID `json:"id"`
	}
	b, err := json.Marshal(msg{ID: math.MaxUint64})
	if err != nil || string(b) != `{"id":18446744073709551615}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var m msg
	if err := json.Unmarshal(b, &m); err != nil || m.ID != math.MaxUint64 {
		t.Fatalf("Unmarshal = %d, %v", m.ID, err)
	}
	for _, bad := range []string{`"ƒ2"`, `1.0`, `1e3`, `-1`, `18446744073709551616`, `null`, `true`} {
		if err := json.Unmarshal([]byte(`{"id":`+bad+`}`), &m); !errors.Is(err, ErrInvalid) {
			t.Errorf("Unmarshal(%s) error = %v, want ErrInvalid", bad, err)
		}
	}
	var id ID
	for _, bad := range []string{``, `01`, `123456789012345678901`} {
		if err := id.UnmarshalJSON([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("UnmarshalJSON(%q) error = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestF58ASCII(t *testing.T) {
	id := ID(6731191091817518)
	if got := id.F58(true); got != "fuZZybuNNy" {
		t.Errorf("F58(true) = %q", got)
	}
	if got := id.F58(false); got != "ƒuZZybuNNy" {
		t.Errorf("F58(false) = %q", got)
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse(bogus) did not panic")
		}
	}()
	MustParse("bogus")
}

// RFC 19 gives more example strings without their values: each must parse
// and encode back to itself.
func TestRFCExamplesRoundTrip(t *testing.T) {
	tests := []struct{ s, enc string }{
		{"ƒZemgA8Bzf", F58},
		{"ƒ278oEf7zGf", F58},
		{"0x17e9fb8df16c2e", Hex},
		{"0xedaf97d000000", Hex},
		{"0017.e9fb.8df1.6c2e", DotHex},
		{"000e.daf9.7d00.0000", DotHex},
		{"reform-remote-galileo--heart-package-academy", Words},
		{"random-idea-yoyo--sugar-printer-academy", Words},
		{"🚹💂🙌😳💱🏃", Emoji},
		{"😄😹🎇📥🏧🙉🔞", Emoji},
		{"🚹💂🈳💰🎩🏃", Emoji},
	}
	for _, tt := range tests {
		id, err := Parse(tt.s)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.s, err)
			continue
		}
		if got, _ := id.Encode(tt.enc); got != tt.s {
			t.Errorf("Parse(%q) = %d, which encodes as %q", tt.s, id, got)
		}
	}
}

// TestASCIIF58Locale: the ASCII prefix follows the locale, as flux-core's
// does, in a child process (the choice is made once per process).
func TestASCIIF58Locale(t *testing.T) {
	if os.Getenv("JOBID_LOCALE_CHILD") != "" {
		fmt.Print(ID(1).String())
		return
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"LC_ALL=C"}, "f2"},
		{[]string{"LC_ALL=", "LANG=C"}, "f2"},
		{[]string{"LC_ALL=", "LANG=en_US.UTF-8"}, "ƒ2"},
		{[]string{"LC_ALL=C.utf8"}, "ƒ2"},
		{[]string{"LC_ALL=", "LC_CTYPE=", "LANG="}, "ƒ2"},
		{[]string{"LC_ALL=C.UTF-8", "FLUX_F58_FORCE_ASCII=1"}, "f2"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestASCIIF58Locale$")
		cmd.Env = append(os.Environ(), "JOBID_LOCALE_CHILD=1", "LC_CTYPE=", "FLUX_F58_FORCE_ASCII=")
		cmd.Env = append(cmd.Env, tc.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if got, _, _ := strings.Cut(string(out), "PASS"); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}
