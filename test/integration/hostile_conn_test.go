package integration

import (
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
