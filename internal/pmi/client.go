package pmi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Client is one process's PMI-1 connection to its process manager. Its
// methods are not safe for concurrent use (the protocol is lock-step).
// A cancelled context closes the connection: a PMI operation cannot be
// abandoned half way and resumed.
type Client struct {
	conn io.ReadWriteCloser
	r    *bufio.Reader

	rank, size int
	kvsname    string
	maxes      Maxes
	inited     bool

	closeOnce sync.Once
	closeErr  error
}

// NewClient wraps an established connection (PMI_FD) for the process of
// the given rank in a group of size processes.
func NewClient(conn io.ReadWriteCloser, rank, size int) *Client {
	return &Client{conn: conn, r: bufio.NewReader(conn), rank: rank, size: size}
}

// Rank is this process's rank in its group.
func (c *Client) Rank() int { return c.rank }

// Size is the number of processes in the group.
func (c *Client) Size() int { return c.size }

// KVSName is the group's KVS name (known after Init).
func (c *Client) KVSName() string { return c.kvsname }

// Maxes are the server's length limits (known after Init).
func (c *Client) Maxes() Maxes { return c.maxes }

// Close closes the connection without finalizing.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	return c.closeErr
}

// call sends req and reads the response, which must be for want.
func (c *Client) call(ctx context.Context, req *Message, want string) (*Message, error) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if _, err := io.WriteString(c.conn, req.String()); err != nil {
		return nil, c.ctxErr(ctx, fmt.Errorf("pmi %s: %w", req.Cmd, err))
	}
	resp, err := c.read(ctx, want)
	if err != nil {
		return nil, err
	}
	return resp, checkRC(req.Cmd, resp)
}

func (c *Client) read(ctx context.Context, want string) (*Message, error) {
	line, err := readLine(c.r)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, c.ctxErr(ctx, fmt.Errorf("pmi: waiting for %s: %w", want, err))
	}
	resp, err := ParseMessage(line)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.Cmd != want {
		c.Close()
		return nil, fmt.Errorf("%w: expected cmd=%s, got %q", ErrProtocol, want, strings.TrimSpace(line))
	}
	return resp, nil
}

func (c *Client) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

// checkRC turns a nonzero rc= into an *Error.
func checkRC(cmd string, m *Message) error {
	if _, ok := m.Get("rc"); !ok {
		return nil
	}
	rc, err := m.Int("rc")
	if err != nil {
		return err
	}
	if rc == 0 {
		return nil
	}
	msg, _ := m.Get("msg")
	return &Error{Cmd: cmd, RC: rc, Msg: msg}
}

// Init negotiates PMI 1.1 and fetches the server's limits and the
// group's KVS name: cmd=init, cmd=get_maxes, cmd=get_my_kvsname.
func (c *Client) Init(ctx context.Context) error {
	req := NewMessage("init").SetInt("pmi_version", 1).SetInt("pmi_subversion", 1)
	resp, err := c.call(ctx, req, "response_to_init")
	if err != nil {
		return err
	}
	if _, ok := resp.Get("pmi_version"); ok {
		v, err := resp.Int("pmi_version")
		if err != nil {
			return err
		}
		if v != 1 {
			return fmt.Errorf("%w: server chose PMI version %d; this client speaks 1", ErrProtocol, v)
		}
	}
	resp, err = c.call(ctx, NewMessage("get_maxes"), "maxes")
	if err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"kvsname_max", &c.maxes.KVSNameMax}, {"keylen_max", &c.maxes.KeyMax}, {"vallen_max", &c.maxes.ValueMax}} {
		if *f.dst, err = resp.Int(f.key); err != nil {
			return err
		}
		if *f.dst <= 1 {
			return fmt.Errorf("%w: maxes %s=%d is too small", ErrProtocol, f.key, *f.dst)
		}
	}
	resp, err = c.call(ctx, NewMessage("get_my_kvsname"), "my_kvsname")
	if err != nil {
		return err
	}
	name, ok := resp.Get("kvsname")
	if !ok || !validWord(name) {
		return fmt.Errorf("%w: my_kvsname without a valid kvsname=", ErrProtocol)
	}
	c.kvsname = name
	c.inited = true
	return nil
}

func (c *Client) needInit(op string) error {
	if !c.inited {
		return fmt.Errorf("pmi %s: Init has not succeeded", op)
	}
	return nil
}

// Appnum returns the application number (cmd=get_appnum).
func (c *Client) Appnum(ctx context.Context) (int, error) {
	resp, err := c.call(ctx, NewMessage("get_appnum"), "appnum")
	if err != nil {
		return 0, err
	}
	return resp.Int("appnum")
}

// UniverseSize returns the universe size (cmd=get_universe_size).
func (c *Client) UniverseSize(ctx context.Context) (int, error) {
	resp, err := c.call(ctx, NewMessage("get_universe_size"), "universe_size")
	if err != nil {
		return 0, err
	}
	return resp.Int("size")
}

// Put stores key=value in the group's KVS. Other processes see it after
// everyone has passed the next Barrier. Keys are words (visible ASCII
// without '='); values are visible ASCII (33..126) or empty.
func (c *Client) Put(ctx context.Context, key, value string) error {
	if err := c.needInit("put"); err != nil {
		return err
	}
	if !validWord(key) || len(key) >= c.maxes.KeyMax {
		return fmt.Errorf("pmi put: key %q: must be 1..%d visible characters without '='", key, c.maxes.KeyMax-1)
	}
	if !validValue(value) || len(value) >= c.maxes.ValueMax {
		return fmt.Errorf("pmi put %s: value must be at most %d visible ASCII characters", key, c.maxes.ValueMax-1)
	}
	req := NewMessage("put").Set("kvsname", c.kvsname).Set("key", key).Set("value", value)
	_, err := c.call(ctx, req, "put_result")
	return err
}

// Barrier waits until every process of the group has entered the
// barrier; puts made before it are then visible to all.
func (c *Client) Barrier(ctx context.Context) error {
	_, err := c.call(ctx, NewMessage("barrier_in"), "barrier_out")
	return err
}

// Get returns the value another process (or this one) put under key. A
// key in the reserved PMI_ namespace that is not set reads as "" (RFC
// 13); any other missing key is an *Error from the server.
func (c *Client) Get(ctx context.Context, key string) (string, error) {
	if err := c.needInit("get"); err != nil {
		return "", err
	}
	if !validWord(key) {
		return "", fmt.Errorf("pmi get: key %q: must be visible characters without '='", key)
	}
	resp, err := c.call(ctx, NewMessage("get").Set("kvsname", c.kvsname).Set("key", key), "get_result")
	if err != nil {
		var rcErr *Error
		if strings.HasPrefix(key, "PMI_") && errors.As(err, &rcErr) {
			return "", nil
		}
		return "", err
	}
	v, _ := resp.Get("value")
	return v, nil
}

// Finalize ends the session (cmd=finalize) and closes the connection.
func (c *Client) Finalize(ctx context.Context) error {
	_, err := c.call(ctx, NewMessage("finalize"), "finalize_ack")
	cerr := c.Close()
	if err != nil {
		return err
	}
	return cerr
}

// Abort asks the process manager to abort the whole group (cmd=abort
// exitcode=N) and closes the connection. As RFC 13 has the PMI library
// do, the caller prints its error message itself and then exits with
// code; the process manager is not required to answer.
func (c *Client) Abort(code int) error {
	_, err := io.WriteString(c.conn, NewMessage("abort").SetInt("exitcode", code).String())
	c.Close()
	return err
}
