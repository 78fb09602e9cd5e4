package broker

// Torpid children. Every link carries a keepalive whenever it has been
// idle for tbon.torpid_min (and at least five times per tbon.timeout),
// so a child that sends nothing for tbon.torpid_max is not merely idle:
// its broker is stopped, overloaded or cut off. Its parent marks it
// torpid, logs it and publishes wire.OverlayTorpidTopic; the resource
// module on rank 0 then withholds the rank from scheduling (flux
// resource status lists it torpid), as flux-core does with its
// broker.torpid group. The first message heard from the child ends it.
// A child still silent at tbon.timeout is dropped and lost (overlay.go).

import (
	"fmt"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

const (
	defaultTorpidMin = 5 * time.Second
	defaultTorpidMax = 30 * time.Second
)

// validateTorpid checks tbon.torpid_min and tbon.torpid_max as
// flux-core does: min positive, max disabled or greater than min.
func (c *Config) validateTorpid() error {
	if c.TorpidMin <= 0 {
		return fmt.Errorf("tbon.torpid_min=%v: must be greater than zero", c.TorpidMin)
	}
	if c.TorpidMax > 0 && c.TorpidMax <= c.TorpidMin {
		return fmt.Errorf("tbon.torpid_max=%v: must be greater than tbon.torpid_min (%v), or 0 to disable torpid checking",
			c.TorpidMax, c.TorpidMin)
	}
	return nil
}

// setTorpidAttrs publishes the two settings as attributes (FSD, "0s"
// for a disabled torpid_max, as flux-core prints them).
func (b *Broker) setTorpidAttrs() {
	b.attrs.set("tbon.torpid_min", fsd.FormatDuration(b.cfg.TorpidMin), attrImmutable)
	max := "0s"
	if b.cfg.TorpidMax > 0 {
		max = fsd.FormatDuration(b.cfg.TorpidMax)
	}
	b.attrs.set("tbon.torpid_max", max, attrImmutable)
}

// keepaliveInterval is how often keepalives go out and links are
// checked: often enough for both tbon.torpid_min and the two timeouts
// to be seen within a fraction of themselves.
func keepaliveInterval(timeout, torpidMin, torpidMax time.Duration) time.Duration {
	d := timeout / 5
	if torpidMin > 0 && torpidMin < d {
		d = torpidMin
	}
	if torpidMax > 0 && torpidMax/2 < d {
		d = torpidMax / 2
	}
	return d
}

// checkTorpid marks child link l torpid when it has been silent for
// longer than tbon.torpid_max (called by the keepalive loop).
func (o *overlay) checkTorpid(l *link, silent time.Duration) {
	max := o.b.cfg.TorpidMax
	if l.pk != peerChild || max <= 0 || silent <= max || !l.torpid.CompareAndSwap(false, true) {
		return
	}
	o.b.log.Warn(fmt.Sprintf("overlay: rank %d is torpid: nothing heard for %v (tbon.torpid_max %v)",
		l.rank, silent.Round(time.Millisecond), max))
	o.torpidChanged(l.rank, true)
}

// heard is called for every message read from l: a torpid child is
// torpid no longer.
func (o *overlay) heard(l *link) {
	if l.torpid.Load() && l.torpid.CompareAndSwap(true, false) {
		o.b.log.Info(fmt.Sprintf("overlay: rank %d is no longer torpid", l.rank))
		o.torpidChanged(l.rank, false)
	}
}

// linkEnded clears the torpid mark of a child link that was dropped:
// the rank is lost (or gone) now, which the resource module learns on
// its own.
func (o *overlay) linkEnded(l *link) {
	if l.torpid.CompareAndSwap(true, false) {
		o.torpidChanged(l.rank, false)
	}
}

// torpidChanged tells the instance: the event goes up the tree to rank
// 0 behind everything this broker sent before it, so a rank's torpid
// and no-longer-torpid events arrive in order.
func (o *overlay) torpidChanged(rank uint32, torpid bool) {
	o.notifyChanged()
	ev := message.New(message.Event, wire.OverlayTorpidTopic)
	ev.Userid, ev.Rolemask = o.b.owner, message.RoleOwner
	ev.Flags |= message.FlagRoute
	ev.MarshalPayload(wire.OverlayTorpid{Rank: rank, Torpid: torpid})
	o.b.router.publish(ev)
}
