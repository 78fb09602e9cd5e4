// Package resource is the client side of the Flux resource service: the
// scheduler's view of resources (resource.sched-status, what flux
// resource list shows), the administrative view (resource.status, for
// flux resource status and drain), and draining nodes. It speaks
// flux-core's payloads, so it works against flux-core instances too.
package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// SchedStatus is the scheduler's view of the instance's resources.
type SchedStatus struct {
	All       *rset.R // every resource the scheduler knows
	Down      *rset.R // unavailable: offline, drained ...
	Allocated *rset.R // held by jobs
}

// Up returns the resources that are not down.
func (s *SchedStatus) Up() *rset.R { return s.All.Difference(s.Down) }

// Free returns the resources that are neither down nor allocated.
func (s *SchedStatus) Free() *rset.R { return s.Up().Difference(s.Allocated) }

// State returns the resources in a flux resource list state: up, down,
// allocated, free or all.
func (s *SchedStatus) State(name string) (*rset.R, error) {
	switch name {
	case "all":
		return s.All, nil
	case "down":
		return s.Down, nil
	case "allocated":
		return s.Allocated, nil
	case "up":
		return s.Up(), nil
	case "free":
		return s.Free(), nil
	}
	return nil, fmt.Errorf("invalid resource state %q (up, down, allocated, free or all): %w", name, syscall.EINVAL)
}

// ParseSchedStatus decodes a resource.sched-status response payload
// {all, down, allocated}.
func ParseSchedStatus(data []byte) (*SchedStatus, error) {
	var raw struct {
		All, Down, Allocated json.RawMessage
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("sched-status payload: %v: %w", err, syscall.EPROTO)
	}
	s := &SchedStatus{}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  **rset.R
	}{{"all", raw.All, &s.All}, {"down", raw.Down, &s.Down}, {"allocated", raw.Allocated, &s.Allocated}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			*f.dst = rset.New()
			continue
		}
		r, err := rset.Parse(f.raw)
		if err != nil {
			return nil, fmt.Errorf("sched-status %s: %w", f.name, err)
		}
		*f.dst = r
	}
	return s, nil
}

// GetSchedStatus asks rank 0's resource service for the scheduler's view
// (falling back to the scheduler itself, as flux-core's tools do, when
// the resource module does not offer it).
func GetSchedStatus(ctx context.Context, h *flux.Handle) (*SchedStatus, error) {
	f, err := h.RPC("resource.sched-status", 0, nil, 0)
	if err != nil {
		return nil, err
	}
	m, err := f.Get(ctx)
	if errors.Is(err, syscall.ENOSYS) {
		if f, err = h.RPC("sched.resource-status", 0, nil, 0); err != nil {
			return nil, err
		}
		m, err = f.Get(ctx)
	}
	if err != nil {
		return nil, err
	}
	return ParseSchedStatus(m.JSON())
}

// DrainInfo says when and why a node was drained.
type DrainInfo struct {
	Timestamp float64 `json:"timestamp"`
	Reason    string  `json:"reason"`
}

// Status is the administrative view of resources.
type Status struct {
	R       *rset.R
	Online  idset.Set
	Offline idset.Set
	Exclude idset.Set
	Torpid  idset.Set
	// Drain maps drained ranks to their drain record.
	Drain map[uint]DrainInfo
}

// Drained returns the drained ranks.
func (s *Status) Drained() idset.Set {
	var ids idset.Set
	for r := range s.Drain {
		ids.Add(r)
	}
	return ids
}

// ParseStatus decodes a resource.status response payload {R, online,
// offline, exclude, torpid?, drain: {idset: {timestamp, reason}}}.
func ParseStatus(data []byte) (*Status, error) {
	var raw struct {
		R       json.RawMessage      `json:"R"`
		Online  string               `json:"online"`
		Offline string               `json:"offline"`
		Exclude string               `json:"exclude"`
		Torpid  string               `json:"torpid"`
		Drain   map[string]DrainInfo `json:"drain"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("status payload: %v: %w", err, syscall.EPROTO)
	}
	s := &Status{Drain: make(map[uint]DrainInfo)}
	var err error
	if s.R, err = rset.Parse(raw.R); err != nil {
		return nil, fmt.Errorf("status R: %w", err)
	}
	for _, f := range []struct {
		name, v string
		dst     *idset.Set
	}{{"online", raw.Online, &s.Online}, {"offline", raw.Offline, &s.Offline},
		{"exclude", raw.Exclude, &s.Exclude}, {"torpid", raw.Torpid, &s.Torpid}} {
		if *f.dst, err = idset.Parse(f.v); err != nil {
			return nil, fmt.Errorf("status %s: %w", f.name, err)
		}
	}
	for key, d := range raw.Drain {
		ids, err := idset.Parse(key)
		if err != nil {
			return nil, fmt.Errorf("status drain key %q: %w", key, err)
		}
		for r := range ids.All() {
			s.Drain[r] = d
		}
	}
	return s, nil
}

// GetStatus fetches resource.status from rank 0.
func GetStatus(ctx context.Context, h *flux.Handle) (*Status, error) {
	f, err := h.RPC("resource.status", 0, nil, 0)
	if err != nil {
		return nil, err
	}
	m, err := f.Get(ctx)
	if err != nil {
		return nil, err
	}
	return ParseStatus(m.JSON())
}

// Drain modes: what happens to targets that are already drained.
const (
	DrainFail           = ""                // the request fails (EEXIST)
	DrainUpdate         = "update"          // they are left as they are
	DrainOverwrite      = "overwrite"       // their reason is replaced
	DrainForceOverwrite = "force-overwrite" // reason and timestamp are replaced
)

// Drain drains targets (an idset of ranks or a hostlist) with reason.
func Drain(ctx context.Context, h *flux.Handle, targets, reason, mode string) error {
	req := map[string]any{"targets": targets}
	if reason != "" {
		req["reason"] = reason
	}
	if mode != DrainFail {
		req["mode"] = mode
	}
	return h.Call(ctx, "resource.drain", 0, req, nil)
}

// Undrain returns targets to service; with force, targets that are not
// drained are not an error.
func Undrain(ctx context.Context, h *flux.Handle, targets string, force bool) error {
	req := map[string]any{"targets": targets}
	if force {
		req["mode"] = "force"
	}
	return h.Call(ctx, "resource.undrain", 0, req, nil)
}

// Reload makes rank 0's resource service replace its inventory with the
// RFC 20 R in the file path or, with xml, the R built from the hwloc
// topologies path/<rank>.xml; force accepts ranks beyond the instance's
// size. The path is read by rank 0's broker.
func Reload(ctx context.Context, h *flux.Handle, path string, xml, force bool) error {
	return h.Call(ctx, "resource.reload", 0, map[string]any{"path": path, "xml": xml, "force": force}, nil)
}

// AcquireMute tells rank 0's resource service to send no more updates on
// the scheduler's resource.acquire stream (before shutdown).
func AcquireMute(ctx context.Context, h *flux.Handle) error {
	return h.Call(ctx, "resource.acquire-mute", 0, map[string]any{}, nil)
}

// Reservation is one advance reservation as sched-simple.reservations
// lists it (flux resource reservations).
type Reservation struct {
	Name     string   `json:"name"`
	Ranks    string   `json:"ranks"`
	Nodelist string   `json:"nodelist"`
	Start    float64  `json:"start"`
	End      float64  `json:"end"`
	Users    []uint32 `json:"users"`
}

// ReservationsResponse is the answer to sched-simple.reservations.
type ReservationsResponse struct {
	Reservations []Reservation `json:"reservations"`
}
