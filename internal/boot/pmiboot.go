package boot

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fluxgo/fluxgo/internal/pmi"
)

// PMI keys the brokers exchange. Each rank puts its own, so no key is
// put twice (RFC 13).
func hostKey(r int) string { return "flux.host." + strconv.Itoa(r) }
func uriKey(r int) string  { return "flux.uri." + strconv.Itoa(r) }

// pmiParams are the command-line settings PMI boot honours.
type pmiParams struct {
	fanout   uint32 // 0: from tbon, else 2
	tbon     *TBON
	certPath string
	hint     string // tbon.interface-hint
	rundir   string
}

// planPMI wires a broker into its instance through PMI-1:
//
//  1. init; rank and size come from the process manager;
//  2. put flux.host.RANK = hostname; barrier; get every rank's hostname;
//  3. choose this rank's endpoint, a leaf's too (a broker joining the
//     running instance later connects below any rank, and finds its
//     parent's URI in the PMI KVS: internal/broker/resize.go): when
//     every rank is on the same host, ipc://RUNDIR/tbon (a unix socket,
//     authenticated by the kernel, no key needed); otherwise
//     tcp://ADDR:PORT on the address tbon.interface-hint selects, with a
//     port the kernel picks, which needs the instance key (tbon.cert);
//  4. put flux.uri.RANK; barrier; get the parent's URI;
//  5. finalize.
//
// A broker joining beyond the booted size boots the same way: its
// process manager gives it its rank R and the new size, and its parent's
// flux.uri key is already in the KVS. A singleton goes through every
// step too, so that it has an endpoint to grow by.
//
// Every rank takes the ipc/tcp decision from the same exchanged data, so
// a missing key fails all of them alike. On any failure after init the
// group is aborted, so no rank is left waiting in a barrier.
//
// The instance key is never generated and passed through the PMI KVS:
// the process manager's KVS is not guaranteed to be readable only by
// this job, and anyone holding the key can join the instance.
func planPMI(ctx context.Context, c *pmi.Client, h Host, pp pmiParams) (_ *Plan, err error) {
	if err := c.Init(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %w", ErrPMI, err)
	}
	rank, size := c.Rank(), c.Size()
	fanout := chooseFanout(pp.fanout, pp.tbon, size)
	k := int(fanout)
	p := &Plan{Method: "pmi", Rank: uint32(rank), Size: uint32(size), Fanout: fanout, CertPath: pp.certPath}
	defer func() {
		if err != nil {
			p.runCleanup()
			c.Abort(1)
		}
	}()
	if err := c.Put(ctx, hostKey(rank), h.Name); err != nil {
		return nil, fmt.Errorf("%w: hostname %q: %w", ErrPMI, h.Name, err)
	}
	if err := c.Barrier(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPMI, err)
	}
	hosts := make([]string, size)
	oneHost := true
	for r := range hosts {
		if hosts[r], err = c.Get(ctx, hostKey(r)); err != nil {
			return nil, fmt.Errorf("%w: rank %d's hostname: %w", ErrPMI, r, err)
		}
		oneHost = oneHost && hosts[r] == hosts[0]
	}
	p.Hostlist = hosts
	if !oneHost && pp.certPath == "" {
		return nil, fmt.Errorf("%w: the %d brokers are spread over several hosts, so they link over tcp:// and need the instance key: "+
			"pass -S tbon.cert=PATH, the same key file on every host (make one with flux keygen). "+
			"fluxgo does not generate a key and pass it through PMI, because the process manager's KVS is not guaranteed to be private to this job",
			ErrNeedCert, size)
	}
	if oneHost {
		if p.BindURI, p.Rundir, p.cleanup, err = ipcEndpoint(pp.rundir); err != nil {
			return nil, err
		}
	} else if p.BindURI, err = tcpEndpoint(h, pp.hint); err != nil {
		return nil, err
	}
	if err := c.Put(ctx, uriKey(rank), p.BindURI); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPMI, err)
	}
	if err := c.Barrier(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPMI, err)
	}
	if rank > 0 {
		parent := parentOf(rank, k) // the k-ary tree's, whatever the size
		if p.ParentURI, err = c.Get(ctx, uriKey(parent)); err != nil {
			return nil, fmt.Errorf("%w: rank %d's overlay URI: %w", ErrPMI, parent, err)
		}
	}
	if err := c.Finalize(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPMI, err)
	}
	return p, nil
}

// chooseFanout: the command line, else [tbon], else 2.
func chooseFanout(cmdline uint32, tb *TBON, size int) uint32 {
	switch {
	case cmdline != 0:
		return cmdline
	case tb != nil && tb.Fanout != 0:
		return tb.Fanout
	case tb != nil && tb.Flat:
		return uint32(max(size-1, 1))
	}
	return 2
}

// MaxSocketPath is the longest path a unix socket may have.
const MaxSocketPath = 107

// ipcEndpoint is the unix socket under the broker's rundir; when no
// rundir was given one is made here (and removed by the cleanup).
func ipcEndpoint(rundir string) (uri, made string, cleanup func(), err error) {
	if rundir == "" {
		if rundir, err = os.MkdirTemp("", "flux-"); err != nil {
			return "", "", nil, fmt.Errorf("rundir: %w", err)
		}
		made = rundir
		cleanup = func() { os.RemoveAll(made) }
	} else if err := os.MkdirAll(rundir, 0o755); err != nil {
		return "", "", nil, fmt.Errorf("rundir: %w", err)
	}
	path := filepath.Join(rundir, "tbon")
	if len(path) > MaxSocketPath {
		if cleanup != nil {
			cleanup()
		}
		return "", "", nil, fmt.Errorf("overlay socket %s is longer than a unix socket path may be (%d bytes); use a shorter rundir", path, MaxSocketPath)
	}
	return "ipc://" + path, made, cleanup, nil
}

// tcpEndpoint picks this host's IPv4 address by interface hint and a
// free port. The port is found by binding port 0 and closing the socket: the
// broker binds it again moments later. (The broker can inherit an
// already-bound listener only for ipc://; a TLS one would have to be
// wrapped by the overlay.)
func tcpEndpoint(h Host, hint string) (string, error) {
	ip, err := h.hintAddr(hint, false)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", hostPort(ip, "0"))
	if err != nil {
		return "", fmt.Errorf("overlay: choosing a port on %s: %w", ip, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return "tcp://" + hostPort(ip, strconv.Itoa(port)), nil
}
