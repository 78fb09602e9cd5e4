package flux

import (
	"fmt"
	"syscall"
)

// Module debug flags: every broker module answers NAME.debug
// {op, flags} -> {flags} (flux module debug), which changes a bit mask
// kept on the module's handle. A module gives the bits its own meaning
// (test hooks: sched-simple's 0x1 denies every allocation) and reads them
// with DebugTest.

// DebugFlags returns the handle's module debug flags.
func (h *Handle) DebugFlags() int { return int(h.debug.Load()) }

// DebugTest reports whether any bit of flag is set in the handle's
// module debug flags, and clears those bits if clear.
func (h *Handle) DebugTest(flag int, clear bool) bool {
	for {
		cur := h.debug.Load()
		if cur&int64(flag) == 0 {
			return false
		}
		if !clear || h.debug.CompareAndSwap(cur, cur&^int64(flag)) {
			return true
		}
	}
}

// ApplyDebugOp returns the debug flags cur becomes under a NAME.debug
// operation: "setbit" sets the bits of flags, "clrbit" clears them,
// "set" replaces the mask with flags and "clr" clears it.
func ApplyDebugOp(cur int, op string, flags int) (int, error) {
	switch op {
	case "setbit":
		return cur | flags, nil
	case "clrbit":
		return cur &^ flags, nil
	case "set":
		return flags, nil
	case "clr":
		return 0, nil
	}
	return cur, NewError(syscall.EPROTO, fmt.Sprintf("debug op %q: use setbit, clrbit, set or clr", op))
}

// RespondDebug answers a NAME.debug request {op, flags} for the handle's
// module: it applies the operation (ApplyDebugOp) and responds with the
// resulting {flags}. Only the instance owner may change them.
func (h *Handle) RespondDebug(r *Request) {
	var req struct {
		Op    *string `json:"op"`
		Flags *int    `json:"flags"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "%s is only for the instance owner", r.Topic())
		return
	}
	if req.Op == nil || req.Flags == nil {
		r.Errorf(syscall.EPROTO, "%s: want {op, flags}", r.Topic())
		return
	}
	for {
		cur := h.debug.Load()
		next, err := ApplyDebugOp(int(cur), *req.Op, *req.Flags)
		if err != nil {
			r.RespondError(err)
			return
		}
		if h.debug.CompareAndSwap(cur, int64(next)) {
			r.Respond(map[string]int{"flags": next})
			return
		}
	}
}
