package sign

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	J := Wrap([]byte(`{"a":1}`), 1234)
	env, err := Unwrap(J)
	if err != nil {
		t.Fatal(err)
	}
	if env.Userid != 1234 || string(env.Payload) != `{"a":1}` || env.Mechanism != "none" {
		t.Fatalf("%+v", env)
	}
}

// TestFluxCoreJ decodes the J flux-core's flux submit sent in the recorded
// transcript, and checks Wrap produces the same header.
func TestFluxCoreJ(t *testing.T) {
	f, err := os.Open("../../testdata/wire/submit-py.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var rec struct {
			Topic   string `json:"topic"`
			Dir     string `json:"dir"`
			Payload struct {
				J string `json:"J"`
			} `json:"payload"`
		}
		json.Unmarshal(sc.Bytes(), &rec)
		if rec.Topic != "job-ingest.submit" || rec.Dir != "client->broker" {
			continue
		}
		env, err := Unwrap(rec.Payload.J)
		if err != nil {
			t.Fatal(err)
		}
		if env.Userid != 0 {
			t.Fatalf("userid %d", env.Userid)
		}
		var js map[string]any
		if err := json.Unmarshal(env.Payload, &js); err != nil {
			t.Fatalf("payload: %v", err)
		}
		if Wrap(env.Payload, 0) != rec.Payload.J {
			t.Fatal("Wrap does not reproduce flux-core's J")
		}
		return
	}
	t.Fatal("no submit in transcript")
}

func TestErrors(t *testing.T) {
	for _, J := range []string{"", "a.b", "!!!.e30=.none", Wrap(nil, 1) + "x",
		"dmVyc2lvbgBpMgB1c2VyaWQAaTAAbWVjaGFuaXNtAHNub25lAA==.e30=.none"} {
		if _, err := Unwrap(J); !errors.Is(err, ErrInvalid) {
			t.Errorf("Unwrap(%q) = %v", J, err)
		}
	}
}

func FuzzUnwrap(f *testing.F) {
	f.Add(Wrap([]byte("{}"), 5))
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, J string) {
		env, err := Unwrap(J)
		if err != nil {
			return
		}
		if _, err := Unwrap(Wrap(env.Payload, env.Userid)); err != nil {
			t.Fatal(err)
		}
	})
}
