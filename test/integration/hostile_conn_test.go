package integration

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux/message/messagetest"
)

// rssKB reads a process's resident set size in KiB.
func rssKB(t *testing.T, pid string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestStalledConnections: 1,000 local connections that each declare a
// message of 1 GiB and send 100 bytes of it cost the broker memory for
// what arrived, not for what was declared, and it goes on answering.
func TestStalledConnections(t *testing.T) {
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	const nconn = 1000
	if lim.Cur < nconn+100 {
		lim.Cur = min(lim.Max, nconn+200)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur < nconn+100 {
		t.Skipf("RLIMIT_NOFILE %d is too low for %d connections", lim.Cur, nconn)
	}
	e := start(t)
	pid := e.must("getattr", "broker.pid")
	path := strings.TrimPrefix(e.inst.URI, "local://")
	e.must("getattr", "rank")
	before := rssKB(t, pid)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	frame := binary.LittleEndian.AppendUint32(nil, 0xffee0012)
	frame = binary.BigEndian.AppendUint32(frame, 1<<30)
	frame = append(frame, make([]byte, 100)...)
	for i := 0; i < nconn; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := c.Write(frame); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	t0 := time.Now()
	if got := e.must("getattr", "rank"); got != "0" {
		t.Fatalf("getattr rank with %d stalled connections: %q", nconn, got)
	}
	after := rssKB(t, pid)
	t.Logf("broker RSS %d KiB before, %d KiB with %d stalled connections (+%d KiB); getattr took %v",
		before, after, nconn, after-before, time.Since(t0))
	// each holds a 64 KiB read buffer and a goroutine: well under 1 MiB,
	// where 1 GiB each was allocated before
	if grow := after - before; grow > nconn*512 {
		t.Errorf("broker grew by %d KiB for %d stalled connections", grow, nconn)
	}
}

// TestConnectionsPastFileLimit: connections past the broker's file
// descriptor limit fail, and once they close the broker takes new ones
// again (its accept loop stopped for good at the first EMFILE).
func TestConnectionsPastFileLimit(t *testing.T) {
	e := start(t)
	pid, _ := strconv.Atoi(e.must("getattr", "broker.pid"))
	lim := unix.Rlimit{Cur: 256, Max: 256}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Skipf("cannot lower the broker's file limit: %v", err)
	}
	path := strings.TrimPrefix(e.inst.URI, "local://")
	var conns []net.Conn
	for i := 0; i < 400; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	time.Sleep(200 * time.Millisecond) // the broker tries to take them all
	for _, c := range conns {
		c.Close()
	}
	lim = unix.Rlimit{Cur: 20000, Max: 20000}
	unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil)
	// a new client gets in within the accept backoff (at most 1 s)
	r := e.inst.Run(t, "getattr", "rank")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "0" {
		t.Fatalf("getattr after %d connections past the file limit: %+v", len(conns), r)
	}
	if log := e.must("dmesg"); !strings.Contains(log, "local connector accept (retrying)") {
		t.Errorf("the broker did not say it ran out of descriptors:\n%s", log)
	}
}

// guestConnsScript opens connections as the guest until one is refused
// (at most 100) and says how many it got and why the next was refused.
const guestConnsScript = `
import flux
hs = []
try:
    for i in range(100):
        hs.append(flux.Flux())
    print("opened", len(hs))
except OSError as e:
    print("opened", len(hs), "refused", e.errno)
`

// TestAccessReload: flux config reload applies a new [access] table to
// new connections (it was read only at start, and the reload said
// nothing).
func TestAccessReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	dir := t.TempDir()
	write := func(conf string) {
		if err := os.WriteFile(dir+"/access.toml", []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("[access]\nallow-guest-user = true\n")
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path=" + dir}})}
	if !canRunAsGuest(e) {
		t.Skip("needs root, to run a client as another user")
	}
	if r := e.asGuest("getattr", "rank"); r.Code != 0 {
		t.Fatalf("guest before: %+v", r)
	}
	write("[access]\nallow-guest-user = false\n")
	e.must("config", "reload")
	if r := e.asGuest("getattr", "rank"); r.Code == 0 || !strings.Contains(r.Stderr, "access.allow-guest-user") {
		t.Fatalf("guest after allow-guest-user = false: %+v", r)
	}
	write("[access]\nallow-guest-user = true\nmax-user-connections = 3\n")
	e.must("config", "reload")
	if got := e.must("getattr", "access.max-user-connections"); got != "3" {
		t.Errorf("max-user-connections after reload: %s", got)
	}
	if r := e.asGuest("getattr", "rank"); r.Code != 0 {
		t.Fatalf("guest after allow-guest-user = true: %+v", r)
	}
}

// TestGuestConnectionLimit: a guest holds at most
// access.max-user-connections local connections at once; the owner is not
// bound by it, and the guest's are counted again as they close.
func TestGuestConnectionLimit(t *testing.T) {
	e := start(t)
	if !canRunAsGuest(e) {
		t.Skip("needs root, to run a client as another user")
	}
	e.fail("must be a positive integer", "setattr", "access.max-user-connections", "0")
	e.must("setattr", "access.max-user-connections", "5")
	// the guest's job shells (the one that ran this job stays, idle, with
	// a spare beside it) are the broker's children and hold no slot
	if r := e.asGuest("run", "true"); r.Code != 0 {
		t.Fatalf("guest job: %+v", r)
	}
	want := "opened 5 refused " + strconv.Itoa(int(syscall.EUSERS))
	for i := 0; i < 2; i++ { // the second time: the first's connections were let go
		out, err := guestPython(e, guestConnsScript)
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Fatalf("guest connections (try %d): %v\n%s\nwant %q", i, err, out, want)
		}
	}
	// the owner is not bound
	path := strings.TrimPrefix(e.inst.URI, "local://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 10; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil || b[0] != 0 {
			t.Fatalf("owner connection %d: auth byte %d, %v", i, b[0], err)
		}
	}
	if got := e.must("dmesg"); !strings.Contains(got, "access.max-user-connections") {
		t.Errorf("no log line says why the guest was refused")
	}
}

// guestPendingScript opens 20 raw connections as the guest, each
// declaring a 256 MiB message and sending 1 MiB of it, and reports how
// many the broker dropped (waiting up to 30 s for at least 15); then it
// sends one whole 3 MiB message on a new connection.
const guestPendingScript = `
import os, select, socket, struct, sys, time, flux
path = os.environ["FLUX_URI"][len("local://"):]
socks, dropped = [], 0
hdr = struct.pack("<I", 0xffee0012) + struct.pack(">I", 256 << 20)
for i in range(20):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    assert s.recv(1) == b"\0"
    try:
        s.sendall(hdr + bytes(1 << 20))
        socks.append(s)
    except OSError:
        dropped += 1
        s.close()
deadline = time.time() + 30
while dropped < 15 and socks and time.time() < deadline:
    r, _, _ = select.select(socks, [], [], 1)
    for s in r:
        try:
            if s.recv(1) == b"":
                raise OSError()
        except OSError:
            dropped += 1
            socks.remove(s)
            s.close()
print("dropped", ">=15" if dropped >= 15 else dropped, "kept", ">=1" if socks else 0)
for s in socks:
    s.close()
h = flux.Flux()
print("ping", len(h.rpc("broker.ping", {"pad": "x" * (3 << 20)}).get()["pad"]))
`

// TestGuestPendingLimit: a guest's half-received messages together hold
// at most access.max-user-pending: past it the broker drops the
// connection that asked for more (and says why), keeps the others, and
// once they are gone the guest's large messages go through again.
func TestGuestPendingLimit(t *testing.T) {
	e := start(t)
	if !canRunAsGuest(e) {
		t.Skip("needs root, to run a client as another user")
	}
	e.fail("must be at least 64K", "setattr", "access.max-user-pending", "1K")
	e.fail("must be a size", "setattr", "access.max-user-pending", "lots")
	e.must("setattr", "access.max-user-pending", "4M")
	out, err := guestPython(e, guestPendingScript)
	want := "dropped >=15 kept >=1\nping 3145728"
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("guest pending messages: %v\n%s\nwant %q", err, out, want)
	}
	if got := e.must("dmesg"); !strings.Contains(got, "access.max-user-pending") {
		t.Errorf("no log line says why the guest's connection was dropped")
	}
}

// TestHostileFramesBroker: each malformed stream of the codec's hostile
// corpus (pkg/flux/message/testdata/hostile), sent to a running broker
// on its own connection, makes the broker drop that connection (the
// client's end of the stream closed after it), and the broker goes on
// answering.
func TestHostileFramesBroker(t *testing.T) {
	cases, err := messagetest.Hostile("../../pkg/flux/message/testdata/hostile")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	path := strings.TrimPrefix(e.inst.URI, "local://")
	for _, tc := range cases {
		raw := tc.Raw
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		var auth [1]byte
		if _, err := io.ReadFull(c, auth[:]); err != nil || auth[0] != 0 {
			t.Fatalf("auth byte %d: %v", auth[0], err)
		}
		c.Write(raw)
		c.CloseWrite()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		rest, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Errorf("%s: the broker did not drop the connection: %v", tc.Name, err)
		} else if len(rest) != 0 {
			t.Errorf("%s: the broker answered %d bytes to a malformed stream", tc.Name, len(rest))
		}
		if got := e.must("getattr", "rank"); got != "0" {
			t.Fatalf("after %s: getattr rank %q", tc.Name, got)
		}
	}
}
