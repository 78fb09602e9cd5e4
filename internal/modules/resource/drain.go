package resource

import (
	"fmt"
	"sort"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// Drain modes of resource.drain (flux resource drain -u, -f, -ff) and the
// RFC 44 overwrite value each records.
var drainModes = map[string]int{
	"":                0, // fail if a target is already drained
	"update":          0, // leave already drained targets as they are
	"overwrite":       1, // replace the reason
	"force-overwrite": 2, // replace the reason and the timestamp
}

// applyDrain drains ranks at time ts; overwrite says what happens to
// ranks already drained (RFC 44: 0 nothing, 1 the reason, 2 both).
func (inv *inventory) applyDrain(ranks idset.Set, ts float64, reason string, overwrite int) {
	for rank := range ranks.All() {
		old, was := inv.drained[rank]
		switch {
		case !was || overwrite == 2:
			inv.drained[rank] = drainInfo{Timestamp: ts, Reason: reason}
		case overwrite == 1:
			inv.drained[rank] = drainInfo{Timestamp: old.Timestamp, Reason: reason}
		}
	}
}

func (inv *inventory) drain(r *flux.Request) {
	var req struct {
		Targets string `json:"targets"`
		Reason  string `json:"reason"`
		Mode    string `json:"mode"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOperator() {
		r.Errorf(syscall.EPERM, "only the instance owner or an operator may drain nodes")
		return
	}
	overwrite, ok := drainModes[req.Mode]
	if !ok {
		r.Errorf(syscall.EINVAL, "unknown drain mode %q (update, overwrite or force-overwrite)", req.Mode)
		return
	}
	if !inv.ready(r) {
		return
	}
	ranks, err := inv.targets(req.Targets)
	if err != nil {
		r.RespondError(err)
		return
	}
	var already idset.Set
	for rank := range ranks.All() {
		if _, ok := inv.drained[rank]; ok {
			already.Add(rank)
		}
	}
	if req.Mode == "" && !already.Empty() {
		r.Errorf(syscall.EEXIST, "%s (rank %s) already drained", inv.nodelist(already), already)
		return
	}
	if req.Mode == "update" {
		ranks = ranks.Difference(already)
	}
	if !ranks.Empty() {
		now := float64(time.Now().UnixNano()) / 1e9
		inv.applyDrain(ranks, now, req.Reason, overwrite)
		inv.reslog.post("drain", map[string]any{
			"idset":     ranks.String(),
			"nodelist":  inv.nodelist(ranks),
			"reason":    req.Reason,
			"overwrite": overwrite,
		})
		inv.changed()
	}
	inv.respondLogged(r)
}

func (inv *inventory) undrain(r *flux.Request) {
	var req struct {
		Targets string `json:"targets"`
		Mode    string `json:"mode"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOperator() {
		r.Errorf(syscall.EPERM, "only the instance owner or an operator may undrain nodes")
		return
	}
	if req.Mode != "" && req.Mode != "force" {
		r.Errorf(syscall.EINVAL, "unknown undrain mode %q (force)", req.Mode)
		return
	}
	if !inv.ready(r) {
		return
	}
	ranks, err := inv.targets(req.Targets)
	if err != nil {
		r.RespondError(err)
		return
	}
	var notDrained idset.Set
	for rank := range ranks.All() {
		if _, ok := inv.drained[rank]; !ok {
			notDrained.Add(rank)
		}
	}
	if !notDrained.Empty() {
		if req.Mode != "force" {
			r.Errorf(syscall.EINVAL, "rank %s (%s) not drained", notDrained, inv.nodelist(notDrained))
			return
		}
		ranks = ranks.Difference(notDrained)
	}
	if !ranks.Empty() {
		for rank := range ranks.All() {
			delete(inv.drained, rank)
		}
		inv.reslog.post("undrain", map[string]any{"idset": ranks.String(), "nodelist": inv.nodelist(ranks)})
		inv.changed()
	}
	inv.respondLogged(r)
}

// drainInfo returns the drained ranks grouped by timestamp and reason, as
// resource.status reports them: {idset: {timestamp, reason}}.
func (inv *inventory) drainInfo() map[string]drainInfo {
	byInfo := make(map[drainInfo]idset.Set)
	ranks := make([]uint, 0, len(inv.drained))
	for rank := range inv.drained {
		ranks = append(ranks, rank)
	}
	sort.Slice(ranks, func(i, j int) bool { return ranks[i] < ranks[j] })
	for _, rank := range ranks {
		d := inv.drained[rank]
		s := byInfo[d]
		s.Add(rank)
		byInfo[d] = s
	}
	out := make(map[string]drainInfo, len(byInfo))
	for d, s := range byInfo {
		out[s.String()] = d
	}
	return out
}

// String helps log messages.
func (d drainInfo) String() string { return fmt.Sprintf("%q at %.3f", d.Reason, d.Timestamp) }

// respondLogged answers a drain or undrain once its event is in the
// KVS, so that a restart right after the answer still finds it.
func (inv *inventory) respondLogged(r *flux.Request) {
	inv.reslog.sync(func(err error) {
		if err != nil {
			r.Errorf(syscall.EIO, "resource eventlog commit: %v", err)
			return
		}
		r.Respond(nil)
	})
}
