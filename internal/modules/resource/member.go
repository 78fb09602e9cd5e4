package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// member is the part of the module every rank runs: it reports this
// rank to rank 0 and holds rank 0's monitor request. On rank 0 it hands
// the instance-wide services to the inventory.
type member struct {
	h        *flux.Handle
	log      *slog.Logger
	cfg      *Config
	rank     uint32
	hostname string
	inv      *inventory // rank 0 only
	kickC    chan struct{}
	// monitor is rank 0's open resource.monitor request: it fails when
	// this module or broker goes away, telling rank 0 this rank is down.
	monitor *flux.Request
}

// helloPayload is resource.hello: a rank reporting for duty, with what
// it has (used when the inventory is discovered).
type helloPayload struct {
	Rank     uint32 `json:"rank"`
	Hostname string `json:"hostname"`
	Cores    string `json:"cores"`
	GPUs     string `json:"gpus"`
	// NUMA is the rank's NUMA domains when its hwloc topology has them
	// (numa.go): recorded in R's scheduling key for the scheduler.
	NUMA []rset.NUMADomain `json:"numa,omitempty"`
}

func (m *member) register() {
	h := m.h
	h.HandleFunc("resource.monitor", func(r *flux.Request) {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "resource.monitor is only for the instance owner")
			return
		}
		m.monitor = r // never answered; an earlier one is simply dropped
	})
	h.HandleFunc("resource.disconnect", func(r *flux.Request) {
		if m.inv != nil {
			m.inv.disconnect(r.Msg.RouteString())
		}
	})
	rank0 := func(name string, fn flux.HandlerFunc) {
		h.HandleFunc(name, func(r *flux.Request) {
			if m.inv == nil {
				r.Errorf(syscall.EPROTO, "%s: this RPC only works on rank 0", name)
				return
			}
			fn(r)
		})
	}
	h.HandleFunc("resource.topo-get", m.topoGet)
	h.HandleFunc("resource.expiration-update", func(r *flux.Request) {
		if m.inv == nil {
			r.Errorf(syscall.EPROTO, "resource.expiration-update is only available on rank 0")
			return
		}
		m.inv.expirationUpdate(r)
	})
	rank0("resource.status", func(r *flux.Request) { m.inv.status(r) })
	rank0("resource.hello", func(r *flux.Request) { m.inv.hello(r) })
	rank0("resource.acquire", func(r *flux.Request) { m.inv.acquire(r) })
	rank0("resource.drain", func(r *flux.Request) { m.inv.drain(r) })
	rank0("resource.undrain", func(r *flux.Request) { m.inv.undrain(r) })
	rank0("resource.reload", func(r *flux.Request) { m.inv.reload(r) })
	rank0("resource.acquire-mute", func(r *flux.Request) { m.inv.acquireMute(r) })
	rank0("resource.enclosing-ranks", func(r *flux.Request) { m.inv.enclosingRanks(r) }) // nest.go
	rank0("resource.grow", func(r *flux.Request) { m.inv.growRequest(r) })               // grow.go
	rank0("resource.shrink", func(r *flux.Request) { m.inv.shrinkRequest(r) })           // grow.go
	// read-only views are forwarded to rank 0 from other ranks
	forwarded := func(name string, fn flux.HandlerFunc) {
		h.HandleFunc(name, func(r *flux.Request) {
			if m.inv != nil {
				fn(r)
				return
			}
			m.forward(r, 0)
		})
	}
	forwarded("resource.sched-status", func(r *flux.Request) { m.inv.schedStatus(r) })
	forwarded("resource.numa", func(r *flux.Request) { m.inv.numa(r) })
}

// forward relays a request to nodeid and its response back.
func (m *member) forward(r *flux.Request, nodeid uint32) {
	f, err := m.h.RPCRaw(r.Topic(), nodeid, r.Msg.JSON(), 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(resp *flux.Message, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(json.RawMessage(resp.JSON()))
	})
}

// kick asks the hello loop to (re)send hello.
func (m *member) kick() {
	if m.kickC == nil {
		return
	}
	select {
	case m.kickC <- struct{}{}:
	default:
	}
}

// helloLoop reports this rank to rank 0 at load and whenever rank 0 asks
// (resource.rehello), retrying while rank 0's module is not there yet.
// Discovery runs once, here, off the Serve goroutine.
func (m *member) helloLoop(ctx context.Context) {
	m.kickC = make(chan struct{}, 1)
	m.kickC <- struct{}{}
	go func() {
		var payload *helloPayload
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.kickC:
			}
			if payload == nil {
				payload = &helloPayload{Rank: m.rank, Hostname: m.hostname}
				if m.reportsResources() {
					l, err := discover(m.cfg.HwlocXML)
					if err != nil {
						m.log.Error(fmt.Sprintf("discovery failed; reporting no resources: %v", err))
					}
					payload.Cores, payload.GPUs, payload.NUMA = l.Cores.String(), l.GPUs.String(), l.NUMA
				}
			}
			m.sayHello(ctx, payload)
		}
	}()
}

// reportsResources says whether this rank's hello carries what it
// discovers: always unless the inventory is configured and not verified
// (an instance run as a job falls back to discovery when its job's R
// does not fit).
func (m *member) reportsResources() bool {
	c := m.cfg
	configured := c.Entries != nil || c.Path != ""
	return !configured || !c.Verify.off() && !c.ForceUp
}

func (m *member) sayHello(ctx context.Context, p *helloPayload) {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err := m.h.Call(ctx, "resource.hello", 0, p, nil)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.EAGAIN) {
			m.log.Error(fmt.Sprintf("resource.hello to rank 0: %v", err))
			return
		}
		// rank 0's module publishes resource.rehello when it starts: a
		// kick ends the wait at once (with many brokers starting on a
		// loaded machine the back-off alone left ranks down for up to
		// 2 s after rank 0 could hear them)
		select {
		case <-ctx.Done():
			return
		case <-m.kickC:
		case <-time.After(delay):
		}
	}
}
