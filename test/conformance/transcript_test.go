package conformance

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// record is one line of a transcript (see testdata/wire/README.md).
type record struct {
	Conn       int    `json:"conn"`
	Dir        string `json:"dir"`
	AuthByte   *int   `json:"auth_byte"`
	Topic      string `json:"topic"`
	EncodedHex string `json:"encoded_hex"`

	msg *message.Message // decoded from EncodedHex
}

func (r *record) fromClient() bool { return r.Dir == "client->broker" }

// rpc is one request of a transcript and the responses flux-core sent,
// plus (once replayed) the responses fluxgo sent.
type rpc struct {
	conn      int
	matchtag  uint32
	topic     string // as recorded
	streaming bool
	want      []*message.Message

	// filled during replay, guarded by the connection's mutex
	sentTopic string
	got       []*message.Message
	gotDone   bool
}

// terminal reports whether resp ends the RPC.
func (r *rpc) terminal(resp *message.Message) bool {
	return !r.streaming || resp.Errnum != 0
}

// step is a client->broker message, with what must have been answered
// before it is sent: for each earlier RPC (on any connection: the
// transcript is one timeline), how many responses the broker had sent by
// then.
type step struct {
	rec   *record
	call  *rpc // nil if no response is expected
	after map[*rpc]int
}

// transcript is one recorded command.
type transcript struct {
	name      string
	firstConn int
	recs      []*record
	authBytes map[int]int
	steps     []*step
	rpcs      []*rpc
}

func wireDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "wire")
}

// loadTranscripts reads every testdata/wire/*.jsonl, in recording order.
func loadTranscripts() ([]*transcript, error) {
	files, err := filepath.Glob(filepath.Join(wireDir(), "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no transcripts in %s", wireDir())
	}
	var out []*transcript
	for _, f := range files {
		tr, err := loadTranscript(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		out = append(out, tr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].firstConn < out[j].firstConn })
	return out, nil
}

func loadTranscript(path string) (*transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := &transcript{
		name:      strings.TrimSuffix(filepath.Base(path), ".jsonl"),
		firstConn: -1,
		authBytes: map[int]int{},
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		r := &record{}
		if err := json.Unmarshal(sc.Bytes(), r); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if tr.firstConn < 0 || r.Conn < tr.firstConn {
			tr.firstConn = r.Conn
		}
		if r.AuthByte != nil {
			tr.authBytes[r.Conn] = *r.AuthByte
			continue
		}
		b, err := hex.DecodeString(r.EncodedHex)
		if err != nil {
			return nil, fmt.Errorf("line %d: encoded_hex: %w", line, err)
		}
		if r.msg, err = message.Decode(b); err != nil {
			return nil, fmt.Errorf("line %d: decoding message: %w", line, err)
		}
		tr.recs = append(tr.recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	tr.plan()
	return tr, nil
}

// plan pairs responses with requests (a matchtag is reused only after its
// RPC ended) and records, for every client message, which responses had
// arrived before it was sent.
func (tr *transcript) plan() {
	open := map[[2]uint32][]*rpc{} // conn, matchtag -> open RPCs, oldest first
	for _, r := range tr.recs {
		m := r.msg
		key := [2]uint32{uint32(r.Conn), m.Matchtag}
		if r.fromClient() {
			st := &step{rec: r, after: map[*rpc]int{}}
			for _, c := range tr.rpcs {
				if len(c.want) > 0 {
					st.after[c] = len(c.want)
				}
			}
			if m.Type == message.Request && m.Matchtag != message.MatchtagNone && m.Flags&message.FlagNoResponse == 0 {
				c := &rpc{conn: r.Conn, matchtag: m.Matchtag, topic: m.Topic, streaming: m.Flags&message.FlagStreaming != 0}
				st.call = c
				tr.rpcs = append(tr.rpcs, c)
				open[key] = append(open[key], c)
			}
			tr.steps = append(tr.steps, st)
			continue
		}
		if m.Type != message.Response {
			continue
		}
		list := open[key]
		if len(list) == 0 {
			continue // a response to a request the proxy did not see
		}
		c := list[0]
		c.want = append(c.want, m)
		if c.terminal(m) {
			open[key] = list[1:]
		}
	}
}

// submittedIDs returns the job ids flux-core assigned in the transcripts.
func submittedIDs(trs []*transcript) []uint64 {
	var out []uint64
	for _, tr := range trs {
		for _, c := range tr.rpcs {
			if c.topic != "job-ingest.submit" {
				continue
			}
			for _, m := range c.want {
				var resp struct {
					ID uint64 `json:"id"`
				}
				if m.Errnum == 0 && json.Unmarshal(m.JSON(), &resp) == nil && resp.ID != 0 {
					out = append(out, resp.ID)
				}
			}
		}
	}
	return out
}
