package pmi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

// Environment variables by which a process manager offers the wire
// protocol. PMI_FD, PMI_RANK and PMI_SIZE come from RFC 13; PMI_PORT and
// PMI_ID are MPICH's alternative, where the process connects to
// host:port and learns its rank and size from the server.
var EnvVars = []string{"PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_SPAWNED", "PMI_PORT", "PMI_ID"}

// Offered reports whether the environment (read through getenv) offers
// the PMI wire protocol.
func Offered(getenv func(string) string) bool {
	return getenv("PMI_FD") != "" || getenv("PMI_PORT") != ""
}

// FromEnv connects to the process manager named by the environment:
// PMI_FD (with PMI_RANK and PMI_SIZE) or PMI_PORT (with PMI_ID). It
// returns an error wrapping ErrNoPMI when neither is set. Call Init next.
func FromEnv(ctx context.Context, getenv func(string) string) (*Client, error) {
	if fdStr := getenv("PMI_FD"); fdStr != "" {
		fd, err := envInt(getenv, "PMI_FD", 0)
		if err != nil {
			return nil, err
		}
		rank, err := envInt(getenv, "PMI_RANK", 0)
		if err != nil {
			return nil, err
		}
		size, err := envInt(getenv, "PMI_SIZE", 1)
		if err != nil {
			return nil, err
		}
		if rank >= size {
			return nil, fmt.Errorf("PMI_RANK=%d is not less than PMI_SIZE=%d", rank, size)
		}
		conn, err := fdConn(fd)
		if err != nil {
			return nil, err
		}
		return NewClient(conn, rank, size), nil
	}
	if addr := getenv("PMI_PORT"); addr != "" {
		id, err := envInt(getenv, "PMI_ID", 0)
		if err != nil {
			return nil, err
		}
		return DialPort(ctx, addr, id)
	}
	return nil, fmt.Errorf("%w: set PMI_FD, PMI_RANK and PMI_SIZE, or PMI_PORT and PMI_ID", ErrNoPMI)
}

func envInt(getenv func(string) string, name string, min int) (int, error) {
	s := getenv(name)
	if s == "" {
		return 0, fmt.Errorf("%s is not set", name)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		return 0, fmt.Errorf("%s=%q: want an integer >= %d", name, s, min)
	}
	return n, nil
}

// fdConn takes over an inherited descriptor. A socket becomes a
// net.Conn (a close-on-exec duplicate; the original is closed so the
// broker's own children don't inherit it).
func fdConn(fd int) (io.ReadWriteCloser, error) {
	f := os.NewFile(uintptr(fd), "PMI_FD")
	if f == nil {
		return nil, fmt.Errorf("PMI_FD=%d is not a valid descriptor", fd)
	}
	if _, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("PMI_FD=%d: %w", fd, err)
	}
	c, err := net.FileConn(f)
	if err != nil {
		return f, nil // not a socket (a pipe pair is unusual but works)
	}
	f.Close()
	return c, nil
}

// DialPort connects to a PMI_PORT server at addr ("host:port") as the
// process with the given PMI_ID and learns its rank and size from the
// server's initack answer.
func DialPort(ctx context.Context, addr string, id int) (*Client, error) {
	d := net.Dialer{Timeout: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("PMI_PORT=%s: %w", addr, err)
	}
	c := &Client{conn: conn, r: bufio.NewReader(conn), rank: -1, size: -1}
	if err := c.initack(ctx, id); err != nil {
		conn.Close()
		return nil, fmt.Errorf("PMI_PORT=%s: %w", addr, err)
	}
	return c, nil
}

// initack is the PMI_PORT handshake: cmd=initack pmiid=ID, answered by
// cmd=initack and then cmd=set size=N, cmd=set rank=R, cmd=set debug=D.
func (c *Client) initack(ctx context.Context, id int) error {
	if _, err := c.call(ctx, NewMessage("initack").SetInt("pmiid", id), "initack"); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	for i := 0; i < 3; i++ {
		m, err := c.read(ctx, "set")
		if err != nil {
			return err
		}
		for _, k := range m.Keys {
			n, err := m.Int(k)
			if err != nil {
				return err
			}
			switch k {
			case "size":
				c.size = n
			case "rank":
				c.rank = n
			}
		}
	}
	if c.size < 1 || c.rank < 0 || c.rank >= c.size {
		return fmt.Errorf("%w: initack gave rank %d, size %d", ErrProtocol, c.rank, c.size)
	}
	return nil
}
