package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

func TestFormatEvent(t *testing.T) {
	m := message.New(message.Event, "a.b")
	if got := formatEvent(m); got != "a.b" {
		t.Errorf("no payload: %q", got)
	}
	m.SetJSON([]byte(`{"x":1}`))
	if got := formatEvent(m); got != "a.b\t{\"x\":1}" {
		t.Errorf("payload: %q", got)
	}
}

// startSub runs eventSub in the background on its own connection.
func startSub(t *testing.T, tb *testBrokers, topics []string, count int) (*testinstance.Buffer, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	out := &testinstance.Buffer{}
	done := make(chan error, 1)
	sh := tb.handle(t)
	go func() { done <- eventSub(ctx, sh, topics, count, out) }()
	return out, cancel, done
}

func TestEventPubSub(t *testing.T) {
	tb := startBrokers(t, 2, false)
	h := tb.handle(t)
	ctx := testCtx(t)
	out, cancel, done := startSub(t, tb, []string{"test", "test.b", "other"}, 0)
	// Publish probes until one arrives: then the subscription is live.
	waitFor(t, "the subscription", func() bool {
		if err := eventPub(ctx, h, "test.probe", nil, eventPubOptions{}); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out.String(), "test.probe\n")
	})
	pubs := []struct {
		topic   string
		payload string
		o       eventPubOptions
	}{
		{"test.a", "", eventPubOptions{}},
		{"test.b", `{"x":1}`, eventPubOptions{}}, // matches two topics: printed once
		{"nomatch", "", eventPubOptions{}},
		{"test.c", "raw text", eventPubOptions{raw: true}},
		{"test.d", `[1, 2]`, eventPubOptions{sync: true, private: true}},
		{"other.e", "", eventPubOptions{loopback: true}},
		{"test.f", `"s"`, eventPubOptions{loopback: true}},
	}
	for _, p := range pubs {
		var payload []byte
		if p.payload != "" {
			payload = []byte(p.payload)
		}
		if err := eventPub(ctx, h, p.topic, payload, p.o); err != nil {
			t.Fatalf("pub %s: %v", p.topic, err)
		}
	}
	// Sync and loopback publishing from rank 1 go through rank 0.
	h1, err := flux.Open(tb.brokers[1].LocalURI())
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	if err := eventPub(ctx, h1, "test.g", []byte(`{}`), eventPubOptions{loopback: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the last event", func() bool { return strings.Contains(out.String(), "test.g") })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("sub: %v", err)
	}
	got := out.String()
	got = got[strings.LastIndex(got, "test.probe\n")+len("test.probe\n"):]
	want := "test.a\ntest.b\t{\"x\":1}\ntest.c\traw text\ntest.d\t[1, 2]\nother.e\ntest.f\t\"s\"\ntest.g\t{}\n"
	if got != want {
		t.Errorf("sub printed\n%s\nwant\n%s", got, want)
	}
}

func TestEventSubCount(t *testing.T) {
	tb := startBrokers(t, 1, false)
	h := tb.handle(t)
	ctx := testCtx(t)
	out, _, done := startSub(t, tb, nil, 3)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := eventPub(ctx, h, "ev", []byte(`{"i":1}`), eventPubOptions{sync: true}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out.String(), "\n"); n != 3 {
				t.Errorf("--count=3 printed %d lines:\n%s", n, out.String())
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("sub --count=3 never finished")
		}
	}
}

func TestEventPubErrors(t *testing.T) {
	tb := startBrokers(t, 1, false)
	h := tb.handle(t)
	ctx := testCtx(t)
	for name, tc := range map[string]struct {
		topic   string
		payload string
		o       eventPubOptions
	}{
		"bad JSON":   {"a", "{x", eventPubOptions{}},
		"empty":      {"", "", eventPubOptions{}},
		"raw + sync": {"a", "x", eventPubOptions{raw: true, sync: true}},
	} {
		var p []byte
		if tc.payload != "" {
			p = []byte(tc.payload)
		}
		if err := eventPub(ctx, h, tc.topic, p, tc.o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"event", "sub", "-c", "-1"}, strings.NewReader(""), &out, &errb); code == 0 {
		t.Error("sub --count=-1 accepted")
	}
}
