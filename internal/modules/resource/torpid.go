package resource

import (
	"fmt"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Torpid ranks. A broker whose parent has heard nothing from it for
// tbon.torpid_max is torpid (the broker publishes
// wire.OverlayTorpidTopic as it goes torpid and as it is heard again):
// rank 0's inventory lists it in resource.status's torpid set and
// withholds it from the scheduler (acquire's down) until it is heard
// again, as flux-core's resource module does with the broker.torpid
// group. Its running jobs go on. A torpid rank that is then lost goes
// offline and is torpid no longer.

// torpidEvent applies an overlay.torpid event (rank 0).
func (inv *inventory) torpidEvent(m *flux.Message) {
	var ev wire.OverlayTorpid
	if err := m.UnmarshalPayload(&ev); err != nil {
		inv.log.Warn(fmt.Sprintf("ignoring a malformed %s event: %v", wire.OverlayTorpidTopic, err))
		return
	}
	if ev.Rank == 0 || ev.Rank >= inv.size {
		inv.log.Warn(fmt.Sprintf("ignoring %s for rank %d: not a peer rank (size %d)", wire.OverlayTorpidTopic, ev.Rank, inv.size))
		return
	}
	r := uint(ev.Rank)
	if ev.Torpid == inv.torpid.Contains(r) {
		return
	}
	if ev.Torpid {
		inv.torpid.Add(r)
		inv.log.Warn(fmt.Sprintf("rank %d is torpid: no new work until it is heard again", ev.Rank))
	} else {
		inv.torpid.Remove(r)
		inv.log.Info(fmt.Sprintf("rank %d is no longer torpid", ev.Rank))
	}
	inv.changed()
}
