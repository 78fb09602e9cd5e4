package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// TestWireTranscripts replays every transcript, in recording order, on
// one 2-broker instance (the transcripts were recorded on one), and
// compares fluxgo's responses with flux-core's.
func TestWireTranscripts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	trs, err := loadTranscripts()
	if err != nil {
		t.Fatal(err)
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	rp := &replayer{uri: inst.URI, bin: inst.Bin, cwd: t.TempDir(), h: inst.Handle(t),
		jobIDs: map[uint64]uint64{}, recordedIDs: submittedIDs(trs)}
	for _, tr := range trs {
		t.Run(tr.name, func(t *testing.T) {
			var check func()
			if tr.name == "event-pub" {
				check = watchPublished(t, rp, tr)
			}
			rp.replay(t, tr)
			for _, c := range tr.rpcs {
				if shellGone(c) {
					t.Logf("conn %d %s: the job shell had exited (ENOSYS), as in attach.jsonl", c.conn, c.topic)
					continue
				}
				for _, d := range compareRPC(c) {
					t.Errorf("conn %d %s (matchtag %d): %s", c.conn, c.topic, c.matchtag, d)
				}
				// clients decode payloads into maps: member order is
				// only reported
				for _, d := range payloadOrder(c) {
					t.Logf("conn %d %s (matchtag %d): %s", c.conn, c.topic, c.matchtag, d)
				}
			}
			if check != nil {
				check()
			}
		})
	}
}

// watchPublished subscribes to the events a transcript publishes and
// returns a check that they arrived with the recorded payloads.
func watchPublished(t *testing.T, rp *replayer, tr *transcript) func() {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	var want []*message.Message
	for _, r := range tr.recs {
		if r.fromClient() && r.msg.Type == message.Event {
			want = append(want, r.msg)
		}
	}
	if len(want) == 0 {
		cancel()
		return func() {}
	}
	sub, err := rp.h.Subscribe(ctx, want[0].Topic)
	if err != nil {
		cancel()
		t.Fatalf("subscribe %s: %v", want[0].Topic, err)
	}
	return func() {
		defer cancel()
		for _, w := range want {
			m, err := sub.Next(ctx)
			if err != nil {
				t.Errorf("published event %s never arrived: %v", w.Topic, err)
				return
			}
			if m.Topic != w.Topic || string(m.JSON()) != string(w.JSON()) {
				t.Errorf("event %s %s, want %s %s", m.Topic, m.JSON(), w.Topic, w.JSON())
			}
		}
	}
}

// compareRPC lists how fluxgo's responses to one request differ from
// flux-core's.
func compareRPC(c *rpc) []string {
	var out []string
	want, got := c.want, c.got
	// the end of a stream (or an error) is compared on its own
	wantEnd, gotEnd := lastError(want), lastError(got)
	if wantEnd != nil {
		want = want[:len(want)-1]
	}
	if gotEnd != nil {
		got = got[:len(got)-1]
	}
	switch {
	case wantEnd == nil && gotEnd != nil && c.streaming && gotEnd.Errnum == uint32(syscall.ENODATA):
		// the recording stopped before the end of this stream
	case wantEnd == nil && gotEnd != nil:
		out = append(out, fmt.Sprintf("error response errnum %d %q, flux-core answered without error", gotEnd.Errnum, gotEnd.JSON()))
	case wantEnd != nil && gotEnd == nil && !c.streaming:
		out = append(out, fmt.Sprintf("no error response, flux-core answered errnum %d", wantEnd.Errnum))
	case wantEnd != nil && gotEnd == nil && len(c.got) >= len(c.want):
		out = append(out, fmt.Sprintf("stream not ended after %d responses, flux-core ended it with errnum %d after %d",
			len(c.got), wantEnd.Errnum, len(c.want)))
	case wantEnd != nil && gotEnd != nil:
		out = append(out, compareHeader("end of stream", wantEnd, gotEnd, c.sentTopic)...)
	}
	if events(want) != nil && events(got) != nil {
		var d shapeDiff
		d.compareEvents("events", events(want), events(got))
		out = append(out, d.diffs...)
		for i, m := range got {
			out = append(out, compareHeader(fmt.Sprintf("response %d", i), want[min(i, len(want)-1)], m, c.sentTopic)...)
		}
		return out
	}
	if len(got) != len(want) && len(got) < len(c.want) {
		out = append(out, fmt.Sprintf("%d responses, flux-core sent %d", len(got), len(want)))
	}
	for i := 0; i < len(want) && i < len(got); i++ {
		what := fmt.Sprintf("response %d", i)
		out = append(out, compareHeader(what, want[i], got[i], c.sentTopic)...)
		out = append(out, comparePayload(what, want[i], got[i])...)
	}
	return out
}

func lastError(l []*message.Message) *message.Message {
	if n := len(l); n > 0 && l[n-1].Errnum != 0 {
		return l[n-1]
	}
	return nil
}

func compareHeader(what string, want, got *message.Message, topic string) []string {
	var out []string
	if got.Topic != topic {
		out = append(out, fmt.Sprintf("%s: topic %q, want %q", what, got.Topic, topic))
	}
	if got.Errnum != want.Errnum {
		out = append(out, fmt.Sprintf("%s: errnum %d, want %d", what, got.Errnum, want.Errnum))
	}
	if got.Flags != want.Flags {
		out = append(out, fmt.Sprintf("%s: flags 0x%02x, want 0x%02x", what, got.Flags, want.Flags))
	}
	return out
}

func comparePayload(what string, want, got *message.Message) []string {
	wp, gp := want.JSON(), got.JSON()
	if want.Errnum != 0 {
		return nil // error text: a value
	}
	if len(wp) == 0 || len(gp) == 0 {
		if len(wp) != len(gp) {
			return []string{fmt.Sprintf("%s: payload %q, want %q", what, gp, wp)}
		}
		return nil
	}
	wv, err := parseOrdered(wp)
	if err != nil {
		return nil // not JSON: a value
	}
	gv, err := parseOrdered(gp)
	if err != nil {
		return []string{fmt.Sprintf("%s: payload is not JSON: %q", what, gp)}
	}
	var d shapeDiff
	d.compare("", wv, gv, false)
	var out []string
	for _, s := range d.diffs {
		out = append(out, what+": payload "+s)
	}
	return out
}

// events returns the events of an eventlog-watch stream's responses
// ({"event": "<one eventlog line>"}), or nil if they are not that.
func events(l []*message.Message) []event {
	var out []event
	for _, m := range l {
		var p map[string]json.RawMessage
		if json.Unmarshal(m.JSON(), &p) != nil || len(p) != 1 || p["event"] == nil {
			return nil
		}
		var line string
		if json.Unmarshal(p["event"], &line) != nil {
			return nil
		}
		evs := parseEventlog(line)
		if len(evs) != 1 {
			return nil
		}
		out = append(out, evs[0])
	}
	if out == nil {
		return []event{}
	}
	return out
}

// payloadOrder lists member order differences of the top-level payload
// objects of an RPC's responses.
func payloadOrder(c *rpc) []string {
	var out []string
	for i := 0; i < len(c.want) && i < len(c.got); i++ {
		if c.want[i].Errnum != 0 || events(c.want[i:i+1]) != nil && len(events(c.want[i:i+1])) > 0 {
			continue
		}
		wv, err1 := parseOrdered(c.want[i].JSON())
		gv, err2 := parseOrdered(c.got[i].JSON())
		wo, ok1 := wv.(*object)
		go_, ok2 := gv.(*object)
		if err1 != nil || err2 != nil || !ok1 || !ok2 {
			continue
		}
		var d shapeDiff
		d.compareObject("", wo, go_, true)
		for _, s := range d.diffs {
			if strings.Contains(s, "key order") && !strings.Contains(s, "<") {
				out = append(out, fmt.Sprintf("response %d member order (informational): %s", i, s))
			}
		}
	}
	return out
}

// shellGone reports a request to a job shell's service that found the
// shell gone: whether a shell is still there when a client closes its
// stdin is a race (flux-core's attach.jsonl records the same ENOSYS).
func shellGone(c *rpc) bool {
	return normTopic(c.topic) == "SHELL.stdin" && len(c.got) == 1 && c.got[0].Errnum == uint32(syscall.ENOSYS)
}
