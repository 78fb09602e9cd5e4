package pmi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawConn drives a Server over a pipe with literal wire lines.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	done chan error
}

func serveRaw(t *testing.T, s *Server, rank int) *rawConn {
	t.Helper()
	client, server := net.Pipe()
	rc := &rawConn{t: t, c: client, r: bufio.NewReader(client), done: make(chan error, 1)}
	go func() {
		var err error
		if rank < 0 {
			err = s.ServePortConn(context.Background(), server)
		} else {
			err = s.ServeConn(context.Background(), server, rank)
		}
		server.Close()
		rc.done <- err
	}()
	t.Cleanup(func() { client.Close() })
	return rc
}

// exchange writes one request line and returns the response line.
func (rc *rawConn) exchange(req string) string {
	rc.t.Helper()
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(rc.c, req); err != nil {
		rc.t.Fatalf("write %q: %v", req, err)
	}
	line, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("after %q: read: %v", req, err)
	}
	return line
}

func (rc *rawConn) result() error {
	rc.t.Helper()
	select {
	case err := <-rc.done:
		return err
	case <-time.After(10 * time.Second):
		rc.t.Fatal("server did not finish")
		return nil
	}
}

// TestServerWire checks the server's answers byte for byte against the
// RFC 13 grammar, one connection through a whole session.
func TestServerWire(t *testing.T) {
	kvs := NewMemKVS(1)
	kvs.Preput("PMI_process_mapping", ProcessMapping(MappingBlock{0, 1, 1}))
	s := &Server{Info: Info{Size: 1, KVSName: "kvs_42", Appnum: 3}, KVS: kvs}
	rc := serveRaw(t, s, 0)
	steps := []struct{ req, resp string }{
		{"cmd=init pmi_version=1 pmi_subversion=1\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"},
		{"cmd=get_maxes\n", "cmd=maxes rc=0 kvsname_max=256 keylen_max=256 vallen_max=2048\n"},
		{"cmd=get_appnum\n", "cmd=appnum rc=0 appnum=3\n"},
		{"cmd=get_universe_size\n", "cmd=universe_size rc=0 size=1\n"},
		{"cmd=get_my_kvsname\n", "cmd=my_kvsname rc=0 kvsname=kvs_42\n"},
		{"cmd=put kvsname=kvs_42 key=a value=1\n", "cmd=put_result rc=0\n"},
		{"cmd=put kvsname=kvs_42 key=a value=2\n", "cmd=put_result rc=4 msg=key_a_was_already_put\n"},
		{"cmd=put kvsname=other key=b value=1\n", "cmd=put_result rc=3 msg=unknown_kvsname_\"other\"\n"},
		{"cmd=put kvsname=kvs_42 key=PMI_x value=1\n", "cmd=put_result rc=4 msg=keys_beginning_with_PMI__are_reserved\n"},
		{"cmd=put kvsname=kvs_42 key=b\n", "cmd=put_result rc=6 msg=invalid_value\n"},
		{"cmd=put kvsname=kvs_42 key=empty value=\n", "cmd=put_result rc=0\n"},
		{"cmd=get kvsname=kvs_42 key=a\n", "cmd=get_result rc=0 value=1\n"}, // own put, before the barrier
		{"cmd=barrier_in\n", "cmd=barrier_out rc=0\n"},
		{"key=empty kvsname=kvs_42 cmd=get\n", "cmd=get_result rc=0 value=\n"}, // out-of-order tuples
		{"cmd=get kvsname=kvs_42 key=nope\n", "cmd=get_result rc=-1 msg=key_nope_not_found\n"},
		{"cmd=get kvsname=kvs_42 key=PMI_process_mapping\n", "cmd=get_result rc=0 value=(vector,(0,1,1))\n"},
		{"cmd=publish_name service=s port=p\n", "cmd=publish_result rc=-1 msg=name_publishing_is_not_supported\n"},
		{"cmd=lookup_name service=s\n", "cmd=lookup_result rc=-1 msg=name_publishing_is_not_supported\n"},
		{"mcmd=spawn\nnprocs=1\nexecname=x\ntotspawns=1\nspawnssofar=1\nargcnt=0\npreput_num=0\ninfo_num=0\nendcmd\n",
			"cmd=spawn_result rc=-1 msg=spawn_is_not_supported\n"},
		{"cmd=finalize\n", "cmd=finalize_ack rc=0\n"},
	}
	for _, st := range steps {
		if got := rc.exchange(st.req); got != st.resp {
			t.Fatalf("%q:\n got %q\nwant %q", st.req, got, st.resp)
		}
	}
	if err := rc.result(); err != nil {
		t.Fatalf("session after finalize: %v", err)
	}
	if kvs.Finalized() != 1 {
		t.Fatalf("finalized = %d", kvs.Finalized())
	}
}

func TestServerVersionNegotiation(t *testing.T) {
	for _, tc := range []struct{ req, resp string }{
		{"cmd=init pmi_version=1 pmi_subversion=0\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=0\n"},
		{"cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"},
		{"cmd=init pmi_version=0 pmi_subversion=9\n", "cmd=response_to_init rc=-1 msg=PMI_version_0.9_is_not_supported;_this_server_speaks_1.1\n"},
	} {
		s := &Server{Info: Info{Size: 1, KVSName: "k"}, KVS: NewMemKVS(1)}
		rc := serveRaw(t, s, 0)
		if got := rc.exchange(tc.req); got != tc.resp {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.resp)
		}
	}
}

// TestServerProtocolErrors: the server closes the connection on a
// malformed or unknown request (RFC 13, Error Handling).
func TestServerProtocolErrors(t *testing.T) {
	for _, req := range []string{
		"cmd=frobnicate\n",
		"garbage\n",
		"cmd=init pmi_version=x pmi_subversion=1\n",
		"mcmd=teleport\n",
	} {
		t.Run(strings.TrimSpace(req), func(t *testing.T) {
			s := &Server{Info: Info{Size: 1, KVSName: "k"}, KVS: NewMemKVS(1)}
			rc := serveRaw(t, s, 0)
			io.WriteString(rc.c, req)
			if err := rc.result(); !errors.Is(err, ErrProtocol) {
				t.Fatalf("err = %v, want ErrProtocol", err)
			}
			if _, err := rc.r.ReadString('\n'); err == nil {
				t.Fatal("connection still open")
			}
		})
	}
}

func TestServerDisconnectAndAbort(t *testing.T) {
	s := &Server{Info: Info{Size: 2, KVSName: "k"}, KVS: NewMemKVS(2)}
	rc := serveRaw(t, s, 1)
	rc.exchange("cmd=init pmi_version=1 pmi_subversion=1\n")
	rc.c.Close()
	if err := rc.result(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("disconnect: %v, want io.ErrUnexpectedEOF", err)
	}

	kvs := NewMemKVS(2)
	aborted := make(chan [2]int, 1)
	kvs.OnAbort = func(rank, code int, msg string) { aborted <- [2]int{rank, code} }
	s = &Server{Info: Info{Size: 2, KVSName: "k"}, KVS: kvs}
	// rank 0 waits in the barrier; rank 1 aborts; rank 0's barrier fails.
	r0 := serveRaw(t, s, 0)
	r1 := serveRaw(t, s, 1)
	barrier := make(chan string, 1)
	go func() {
		io.WriteString(r0.c, "cmd=barrier_in\n")
		line, _ := r0.r.ReadString('\n')
		barrier <- line
	}()
	if got := r1.exchange("cmd=abort exitcode=7\n"); got != "\n" {
		t.Fatalf("abort answered %q, want a bare newline", got)
	}
	if err := r1.result(); !errors.Is(err, ErrAborted) {
		t.Fatalf("abort: %v", err)
	}
	if got := <-aborted; got != [2]int{1, 7} {
		t.Fatalf("OnAbort got %v", got)
	}
	select {
	case line := <-barrier:
		if !strings.HasPrefix(line, "cmd=barrier_out rc=-1 msg=") {
			t.Fatalf("barrier after abort: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("barrier not released by abort")
	}
}

func TestServerInitack(t *testing.T) {
	s := &Server{Info: Info{Size: 4, KVSName: "k"}, KVS: NewMemKVS(4),
		RankOf: func(id int) (int, error) { return id - 100, nil }}
	rc := serveRaw(t, s, -1)
	want := []string{"cmd=initack rc=0\n", "cmd=set size=4\n", "cmd=set rank=2\n", "cmd=set debug=0\n"}
	if got := rc.exchange("cmd=initack pmiid=102\n"); got != want[0] {
		t.Fatalf("got %q", got)
	}
	for _, w := range want[1:] {
		if got, _ := rc.r.ReadString('\n'); got != w {
			t.Fatalf("got %q, want %q", got, w)
		}
	}

	rc = serveRaw(t, s, -1)
	io.WriteString(rc.c, "cmd=init pmi_version=1 pmi_subversion=1\n")
	if err := rc.result(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("init before initack: %v", err)
	}
	rc = serveRaw(t, s, -1)
	if got := rc.exchange("cmd=initack pmiid=99\n"); got != "cmd=initack rc=3 msg=pmiid_out_of_range\n" {
		t.Fatalf("bad pmiid: %q", got)
	}
}

func TestServerValidate(t *testing.T) {
	s := &Server{Info: Info{Size: 0, KVSName: "k"}, KVS: NewMemKVS(1)}
	if err := s.ServeConn(context.Background(), nopRW{}, 0); err == nil {
		t.Fatal("size 0 accepted")
	}
	s = &Server{Info: Info{Size: 1, KVSName: "a b"}, KVS: NewMemKVS(1)}
	if err := s.ServeConn(context.Background(), nopRW{}, 0); err == nil {
		t.Fatal("kvsname with a space accepted")
	}
	s = &Server{Info: Info{Size: 1, KVSName: "k"}, KVS: NewMemKVS(1)}
	if err := s.ServeConn(context.Background(), nopRW{}, 1); err == nil {
		t.Fatal("rank 1 of 1 accepted")
	}
}

type nopRW struct{}

func (nopRW) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopRW) Write(p []byte) (int, error) { return len(p), nil }

func TestProcessMapping(t *testing.T) {
	if got := ProcessMapping(MappingBlock{0, 2, 2}, MappingBlock{2, 2, 4}); got != "(vector,(0,2,2),(2,2,4))" {
		t.Fatal(got)
	}
}
