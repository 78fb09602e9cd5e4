// Package resource is the resource broker module. It runs on every rank.
//
// Rank 0 keeps the instance inventory, an RFC 20 R, defined by
// configuration ([[resource.config]] entries or an R file, see Config) or
// by dynamic discovery: every rank counts its cores (hwloc XML, else the
// online CPUs of /sys) and reports them, with its hostname, to rank 0,
// which waits for all ranks (at most resource.discover-timeout; ranks that
// never report are left out of the inventory and listed offline).
//
// Liveness: a rank is online once its resource module has said
// resource.hello to rank 0. Rank 0 then keeps a streaming
// resource.monitor request open on that rank; the broker fails it when
// the rank's broker is lost or shuts down (the overlay fails requests in
// flight on a lost link) or the module unloads, and rank 0 marks the rank
// offline. When rank 0's module (re)starts it publishes the event
// resource.rehello so that running ranks say hello again. Drained and
// excluded ranks are withheld from scheduling.
//
// Services on rank 0 (payloads as flux-core's where flux-core's clients
// use them):
//
//	resource.acquire (streaming, RFC 28) -> {resources: R, up: idset},
//	    then {up: idset} / {down: idset} as availability changes
//	resource.status -> {R, online, offline, exclude, torpid,
//	    drain: {idset: {timestamp, reason}}}
//	resource.sched-status -> the scheduler's sched.resource-status
//	    {all, down, allocated}, or this module's own view without one
//	resource.drain {targets, reason?, mode?} (mode: update, overwrite,
//	    force-overwrite); resource.undrain {targets, mode?: force}
//	resource.reload {path, xml, force}: the inventory becomes the R file
//	    path (xml: built from the hwloc files path/<rank>.xml); refused
//	    while a scheduler holds resource.acquire open (EBUSY)
//	resource.acquire-mute: resource.acquire streams get no more updates
//	    (sent before shutdown)
//	resource.hello {rank, hostname, cores, gpus} (from other ranks)
//	resource.grow {R} / resource.shrink {ranks}: dynamic resources, with
//	    acquire responses {resources: R} and {shrink: idset} beyond
//	    RFC 28's (grow.go); a nested instance follows its job's
//	    R_delta_add and R_delta_sub the same way (nest.go)
//
// Torpid (unresponsive) ranks, as their parents report them, are listed
// by resource.status and withheld from scheduling until heard again
// (torpid.go).
//
// The module keeps RFC 44 events in the KVS resource.eventlog
// (resource-define, drain, undrain, online, offline, and resource-grow
// and resource-shrink of grow.go) and the inventory in
// resource.R when a KVS is loaded, and replays drains from the eventlog
// when it starts, so drained nodes stay drained across restarts.
package resource

import (
	"context"
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Name is the module's name.
const Name = "resource"

// Module is the resource module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	cfg, err := loadConfig(ctx, h, args)
	if err != nil {
		return err
	}
	rank, err := attrUint(ctx, h, "rank")
	if err != nil {
		return err
	}
	size, err := attrUint(ctx, h, "size")
	if err != nil {
		return err
	}
	hostname, _ := h.Attr(ctx, "hostname")
	log := flux.NewLogger(h, Name)
	m := &member{h: h, log: log, cfg: cfg, rank: uint32(rank), hostname: hostname}
	m.register()
	var inv *inventory
	if rank == 0 {
		inv = newInventory(h, log, cfg, uint32(size))
		if err := inv.start(ctx, hostname); err != nil {
			return err
		}
		m.inv = inv
	}
	if err := h.OnOwnerEvent(ctx, "resource.rehello", func(*flux.Message) { m.kick() }); err != nil {
		return fmt.Errorf("subscribe to resource.rehello: %w", err)
	}
	if rank == 0 {
		if err := h.OnOwnerEvent(ctx, wire.OverlayTorpidTopic, inv.torpidEvent); err != nil { // torpid.go
			return fmt.Errorf("subscribe to %s: %w", wire.OverlayTorpidTopic, err)
		}
		// ranks that greeted an earlier instance of this module must
		// say hello again
		if err := h.Publish("resource.rehello", nil, false); err != nil {
			log.Warn("publish resource.rehello", "err", err)
		}
	} else {
		m.helloLoop(ctx)
	}
	err = h.Serve(ctx)
	if inv != nil {
		inv.stop()
	}
	return err
}

func attrUint(ctx context.Context, h *flux.Handle, name string) (uint64, error) {
	v, err := h.Attr(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("attribute %s=%q: %w", name, v, syscall.EINVAL)
	}
	return n, nil
}
