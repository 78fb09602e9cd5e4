package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
)

// pingOptions are the flux ping flags (flux-ping(1)).
type pingOptions struct {
	rank     string
	pad      int
	interval time.Duration
	count    int
	batch    bool
	userid   bool
}

func newPingCmd() *cobra.Command {
	var o pingOptions
	var interval, pad string
	cmd := &cobra.Command{
		Use:   "ping [OPTIONS] TARGET",
		Short: "Measure round-trip latency to a Flux service or broker",
		Long: `flux ping sends TARGET.ping requests and prints each response with its
round-trip time and the route it took (one hop per broker or connection).

TARGET is a service name ("kvs" pings kvs.ping), optionally prefixed with a
rank or hostname and "!" ("4!kvs" is "--rank 4 kvs"). A rank or hostname by
itself ("1") pings that broker (1!broker).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := fsd.ParseDuration(interval)
			if err != nil {
				return fmt.Errorf("--interval: %w", err)
			}
			o.interval = d
			n, err := size.Bounded(pad, 0, maxPingPad)
			if err != nil {
				return fmt.Errorf("--pad=%s: %v", pad, err)
			}
			o.pad = int(n)
			if err := o.validate(); err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				t, err := resolvePingTarget(ctx, h, args[0], o.rank)
				if err != nil {
					return err
				}
				return ping(ctx, h, t, o, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.rank, "rank", "r", "", "send to broker `N` (a rank, hostname, \"any\" or \"upstream\")")
	f.StringVarP(&pad, "pad", "p", "0", "include a string of `N` bytes in the payload (suffix k, M: 10K, 1M)")
	f.StringVarP(&interval, "interval", "i", "1", "delay `FSD` between requests (0: none)")
	f.IntVarP(&o.count, "count", "c", 0, "stop after `N` responses (default: until interrupted)")
	f.BoolVarP(&o.batch, "batch", "b", false, "send all requests before reading responses (needs --count)")
	f.BoolVarP(&o.userid, "userid", "u", false, "show the userid and rolemask the service saw")
	return cmd
}

func (o pingOptions) validate() error {
	switch {
	case o.pad < 0:
		return fmt.Errorf("--pad=%d: must be >= 0", o.pad)
	case o.count < 0:
		return fmt.Errorf("--count=%d: must be >= 0", o.count)
	case o.interval < 0:
		return fmt.Errorf("--interval: must be >= 0")
	case o.batch && o.count == 0:
		return fmt.Errorf("--batch needs --count")
	}
	return nil
}

// pingTarget is where the requests go and how replies are labelled.
type pingTarget struct {
	rank    string // as given: "1", "host3", "any", "upstream"
	nodeid  uint32
	service string
}

func (t pingTarget) topic() string { return t.service + ".ping" }

// label is printed before each reply: "1!broker.ping", or "kvs.ping" when
// the request goes to any rank.
func (t pingTarget) label() string {
	if t.rank == "any" {
		return t.topic()
	}
	return t.rank + "!" + t.topic()
}

// splitPingTarget separates TARGET into a rank part and a service, as
// flux-ping(1) reads it. bare reports a TARGET with no "!" and no --rank:
// it may name a host rather than a service.
func splitPingTarget(target, rank string) (r, service string, bare bool) {
	if rank != "" {
		return rank, target, false
	}
	if i := strings.IndexByte(target, '!'); i >= 0 {
		return target[:i], target[i+1:], false
	}
	if isRankWord(target) {
		return target, "broker", false
	}
	return "any", target, true
}

// isRankWord reports whether s names a broker without a hostname lookup.
func isRankWord(s string) bool {
	if s == "any" || s == "upstream" {
		return true
	}
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// parseNodeid turns a rank word or a hostname into a nodeid. hosts is
// called only for hostnames.
func parseNodeid(s string, hosts func() (*hostlist.Hostlist, error)) (uint32, error) {
	switch s {
	case "any":
		return flux.NodeidAny, nil
	case "upstream":
		return flux.NodeidUpstream, nil
	case "":
		return 0, fmt.Errorf("empty rank")
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		if uint32(n) >= flux.NodeidUpstream {
			return 0, fmt.Errorf("rank %s is out of range", s)
		}
		return uint32(n), nil
	}
	if hosts == nil {
		return 0, fmt.Errorf("%q is not a rank, \"any\" or \"upstream\"", s)
	}
	hl, err := hosts()
	if err != nil {
		return 0, err
	}
	i := hl.Find(s)
	if i < 0 {
		return 0, fmt.Errorf("%q is not a rank, \"any\", \"upstream\" or a host of this instance", s)
	}
	return uint32(i), nil
}

// instanceHosts returns a function reading the instance hostlist once.
func instanceHosts(ctx context.Context, h *flux.Handle) func() (*hostlist.Hostlist, error) {
	var hl *hostlist.Hostlist
	return func() (*hostlist.Hostlist, error) {
		if hl != nil {
			return hl, nil
		}
		s, err := h.Attr(ctx, "hostlist")
		if err != nil {
			return nil, err
		}
		if hl, err = hostlist.Parse(s); err != nil {
			return nil, fmt.Errorf("hostlist attribute %q: %w", s, err)
		}
		return hl, nil
	}
}

func resolvePingTarget(ctx context.Context, h *flux.Handle, target, rank string) (pingTarget, error) {
	r, service, bare := splitPingTarget(target, rank)
	hosts := instanceHosts(ctx, h)
	if bare {
		// A bare word may be a hostname: ping that host's broker.
		if hl, err := hosts(); err == nil && hl.Find(target) >= 0 {
			r, service = target, "broker"
		}
	}
	if service == "" {
		return pingTarget{}, fmt.Errorf("target %q: missing service name after '!'", target)
	}
	nodeid, err := parseNodeid(r, hosts)
	if err != nil {
		return pingTarget{}, fmt.Errorf("target %q: %w", target, err)
	}
	return pingTarget{rank: r, nodeid: nodeid, service: service}, nil
}

// pingRequest is the broker.ping (and every service's ping) payload; the
// service echoes it and adds route, userid, rolemask.
type pingRequest struct {
	Seq    int    `json:"seq"`
	TvSec  int64  `json:"time.tv_sec"`
	TvNsec int64  `json:"time.tv_nsec"`
	Pad    string `json:"pad"`
}

type pingResponse struct {
	Seq      int    `json:"seq"`
	Pad      string `json:"pad"`
	Route    string `json:"route"`
	Userid   uint32 `json:"userid"`
	Rolemask uint32 `json:"rolemask"`
}

type pingResult struct {
	resp pingResponse
	rtt  time.Duration
	err  error
}

// ping sends requests to t and prints each reply until o.count replies
// have arrived or ctx ends. A failed request ends it with that error: a
// broker that is lost or unreachable answers at once, so this never hangs
// on a dead target.
func ping(ctx context.Context, h *flux.Handle, t pingTarget, o pingOptions, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pad := strings.Repeat("p", o.pad)
	results := make(chan pingResult)
	var st latencyStats
	sent, pending := 0, 0

	send := func() error {
		t0 := time.Now()
		req := pingRequest{Seq: sent, TvSec: t0.Unix(), TvNsec: int64(t0.Nanosecond()), Pad: pad}
		f, err := h.RPC(t.topic(), t.nodeid, req, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", t.label(), err)
		}
		sent++
		pending++
		go func() {
			var r pingResult
			r.err = f.Decode(ctx, &r.resp)
			r.rtt = time.Since(t0)
			select {
			case results <- r:
			case <-ctx.Done():
			}
		}()
		return nil
	}
	done := func() bool { return o.count > 0 && sent == o.count && pending == 0 }
	finish := func() error {
		if sent > 1 {
			fmt.Fprintf(w, "%s: %d sent, %d received, %s\n", t.label(), sent, st.n, st.summary())
		}
		return nil
	}

	if o.batch {
		for sent < o.count {
			if err := send(); err != nil {
				return err
			}
			if sent < o.count && o.interval > 0 {
				select {
				case <-time.After(o.interval):
				case <-ctx.Done():
					return finish()
				}
			}
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	if o.batch {
		timer.Stop()
	}
	for !done() {
		select {
		case <-ctx.Done():
			return finish()
		case <-timer.C:
			if err := send(); err != nil {
				return err
			}
			if o.count == 0 || sent < o.count {
				timer.Reset(o.interval)
			}
		case r := <-results:
			pending--
			if r.err != nil {
				if ctx.Err() != nil {
					return finish()
				}
				return fmt.Errorf("%s: %w", t.label(), r.err)
			}
			if r.resp.Pad != pad {
				return fmt.Errorf("%s: seq=%d: the response's pad differs from the request's", t.label(), r.resp.Seq)
			}
			st.add(r.rtt)
			fmt.Fprintln(w, formatPingReply(t, r.resp, len(pad), r.rtt, o.userid))
		}
	}
	return finish()
}

// formatPingReply renders one reply as flux ping prints it:
//
//	1!broker.ping pad=0 seq=0 time=0.662 ms (24b8d332!p)
func formatPingReply(t pingTarget, r pingResponse, padLen int, rtt time.Duration, userid bool) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s pad=%d", t.label(), padLen)
	if userid {
		fmt.Fprintf(&sb, " userid=%d rolemask=0x%x", r.Userid, r.Rolemask)
	}
	fmt.Fprintf(&sb, " seq=%d time=%.3f ms (%s)", r.Seq, ms(rtt), r.Route)
	return sb.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyStats accumulates round-trip times (Welford's method).
type latencyStats struct {
	n        int
	min, max time.Duration
	mean, m2 float64 // milliseconds
}

func (s *latencyStats) add(d time.Duration) {
	if s.n == 0 || d < s.min {
		s.min = d
	}
	if d > s.max {
		s.max = d
	}
	s.n++
	x := ms(d)
	delta := x - s.mean
	s.mean += delta / float64(s.n)
	s.m2 += delta * (x - s.mean)
}

func (s *latencyStats) stddev() float64 {
	if s.n < 2 {
		return 0
	}
	return math.Sqrt(s.m2 / float64(s.n-1))
}

// summary is "time min/avg/max/stddev = 0.101/0.143/0.201/0.035 ms".
func (s *latencyStats) summary() string {
	if s.n == 0 {
		return "no responses"
	}
	return fmt.Sprintf("time min/avg/max/stddev = %.3f/%.3f/%.3f/%.3f ms", ms(s.min), s.mean, ms(s.max), s.stddev())
}

// maxPingPad bounds --pad.
const maxPingPad = 64 << 20
