package cli

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
)

func TestSplitPingTarget(t *testing.T) {
	tests := []struct {
		target, rank      string
		wantRank, wantSvc string
		wantBare          bool
	}{
		{"kvs", "", "any", "kvs", true},
		{"4!kvs", "", "4", "kvs", false},
		{"1", "", "1", "broker", false},
		{"upstream", "", "upstream", "broker", false},
		{"any", "", "any", "broker", false},
		{"node3!broker", "", "node3", "broker", false},
		{"kvs", "2", "2", "kvs", false},
		{"host!", "", "host", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.target+"/"+tt.rank, func(t *testing.T) {
			r, svc, bare := splitPingTarget(tt.target, tt.rank)
			if r != tt.wantRank || svc != tt.wantSvc || bare != tt.wantBare {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", r, svc, bare, tt.wantRank, tt.wantSvc, tt.wantBare)
			}
		})
	}
}

func TestParseNodeid(t *testing.T) {
	hosts := func() (*hostlist.Hostlist, error) { return hostlist.Parse("node[0-3]") }
	tests := []struct {
		in   string
		want uint32
		err  bool
	}{
		{"0", 0, false},
		{"17", 17, false},
		{"any", flux.NodeidAny, false},
		{"upstream", flux.NodeidUpstream, false},
		{"node2", 2, false},
		{"node9", 0, true},
		{"-1", 0, true},
		{"4294967295", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseNodeid(tt.in, hosts)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("got %d, %v; want %d, error %v", got, err, tt.want, tt.err)
			}
		})
	}
	if _, err := parseNodeid("node2", nil); err == nil {
		t.Error("hostname accepted without a hostlist")
	}
}

func TestFormatPingReply(t *testing.T) {
	r := pingResponse{Seq: 3, Route: "24b8d332!p", Userid: 1000, Rolemask: 5}
	got := formatPingReply(pingTarget{rank: "1", service: "broker"}, r, 0, 662*time.Microsecond, false)
	if want := "1!broker.ping pad=0 seq=3 time=0.662 ms (24b8d332!p)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = formatPingReply(pingTarget{rank: "any", service: "kvs"}, r, 8, 1500*time.Microsecond, true)
	if want := "kvs.ping pad=8 userid=1000 rolemask=0x5 seq=3 time=1.500 ms (24b8d332!p)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestLatencyStats(t *testing.T) {
	var s latencyStats
	if got := s.summary(); got != "no responses" {
		t.Errorf("empty: %q", got)
	}
	for _, ms := range []int{2, 4, 4, 4, 5, 5, 7, 9} {
		s.add(time.Duration(ms) * time.Millisecond)
	}
	if want := "time min/avg/max/stddev = 2.000/5.000/9.000/2.138 ms"; s.summary() != want {
		t.Errorf("got %q, want %q", s.summary(), want)
	}
}

func TestPingOptionsValidate(t *testing.T) {
	bad := []pingOptions{{pad: -1}, {count: -2}, {interval: -time.Second}, {batch: true}}
	for _, o := range bad {
		if o.validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := (pingOptions{batch: true, count: 2}).validate(); err != nil {
		t.Error(err)
	}
}

var replyLine = regexp.MustCompile(`^(\S+) pad=(\d+) seq=(\d+) time=\d+\.\d{3} ms \((\S+)\)$`)

func TestPing(t *testing.T) {
	tb := startBrokers(t, 3, true)
	h := tb.handle(t)
	tests := []struct {
		name   string
		target string
		o      pingOptions
		label  string
		hops   int    // route entries
		last   string // the responder's own route id, last in the route
		lines  int    // reply lines
	}{
		{"local broker", "0", pingOptions{count: 1}, "0!broker.ping", 2, "0", 1},
		{"child broker", "2", pingOptions{count: 3}, "2!broker.ping", 3, "2", 3},
		{"by hostname", "node1", pingOptions{count: 1}, "node1!broker.ping", 3, "1", 1},
		{"service", "testmod", pingOptions{count: 2, pad: 5}, "testmod.ping", 2, "testmod", 2},
		{"batch", "1!broker", pingOptions{count: 4, batch: true}, "1!broker.ping", 3, "1", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			target, err := resolvePingTarget(ctx, h, tt.target, "")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := ping(ctx, h, target, tt.o, &out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if tt.lines > 1 {
				summary := lines[len(lines)-1]
				lines = lines[:len(lines)-1]
				if !strings.HasPrefix(summary, tt.label+": ") || !strings.Contains(summary, " received, time min/avg/max/stddev = ") {
					t.Errorf("summary line: %q", summary)
				}
			}
			if len(lines) != tt.lines {
				t.Fatalf("got %d reply lines, want %d:\n%s", len(lines), tt.lines, out.String())
			}
			seen := map[string]bool{}
			for _, l := range lines {
				m := replyLine.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("reply line %q doesn't look like flux ping's", l)
				}
				if m[1] != tt.label || m[2] != strconv.Itoa(tt.o.pad) {
					t.Errorf("line %q: want label %s pad=%d", l, tt.label, tt.o.pad)
				}
				hops := strings.Split(m[4], "!")
				if len(hops) != tt.hops || hops[len(hops)-1] != tt.last {
					t.Errorf("route %s: want %d hops ending with %s", m[4], tt.hops, tt.last)
				}
				seen[m[3]] = true
			}
			if len(seen) != tt.lines {
				t.Errorf("sequence numbers repeat: %s", out.String())
			}
		})
	}
}

func TestPingErrors(t *testing.T) {
	tb := startBrokers(t, 2, false)
	h := tb.handle(t)
	ctx := testCtx(t)
	run := func(target string) error {
		tg, err := resolvePingTarget(ctx, h, target, "")
		if err != nil {
			return err
		}
		return ping(ctx, h, tg, pingOptions{count: 1}, &bytes.Buffer{})
	}
	if err := run("nosuch"); !errors.Is(err, syscall.ENOSYS) {
		t.Errorf("unknown service: got %v, want ENOSYS", err)
	}
	if err := run("7"); !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Errorf("rank beyond the instance: got %v, want EHOSTUNREACH", err)
	}
	if err := run("nohost!broker"); err == nil || !strings.Contains(err.Error(), "nohost") {
		t.Errorf("unknown host: got %v", err)
	}
	if err := run("1!"); err == nil {
		t.Error("empty service accepted")
	}
}

// TestPingInterrupted ends an unlimited ping with ctx and gets a summary.
func TestPingInterrupted(t *testing.T) {
	tb := startBrokers(t, 1, false)
	h := tb.handle(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	out := &testinstance.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- ping(ctx, h, pingTarget{rank: "0", nodeid: 0, service: "broker"}, pingOptions{interval: time.Millisecond}, out)
	}()
	waitFor(t, "three replies", func() bool { return strings.Count(out.String(), "\n") >= 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "0!broker.ping: ") {
		t.Errorf("no summary after interrupt: %q", last)
	}
}
