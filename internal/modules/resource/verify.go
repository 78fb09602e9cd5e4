package resource

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Verification (flux-config-resource(5) verify, noverify): when the
// inventory comes from the configuration (resource.config or .path),
// each rank compares its part of it with what it finds on its host, and
// a rank that does not match is drained with the reason, rather than
// scheduled for cores or a host it does not have.
//
//	hostname  the broker's hostname must be the one R gives its rank
//	core      the cores R gives the rank must exist (more is fine)
//	gpu       not checked
//
// is the default. resource.verify = true checks all three strictly
// (missing or extra), false (or noverify = true) none; a [resource.verify]
// table sets a mode per kind (default, hostname, core, gpu: "strict",
// "allow-extra", "allow-missing" or "ignore"; absent keys are strict).
// An instance run as a job does not verify its R unless verify is set.

type verifyMode string

const (
	verifyStrict       verifyMode = "strict"
	verifyAllowExtra   verifyMode = "allow-extra"
	verifyAllowMissing verifyMode = "allow-missing"
	verifyIgnore       verifyMode = "ignore"
)

var verifyModes = []verifyMode{verifyStrict, verifyAllowExtra, verifyAllowMissing, verifyIgnore}

// Verify says what a rank's resources are checked for.
type Verify struct {
	Hostname, Core, GPU verifyMode
	// Explicit: set by configuration (verify), not the default.
	Explicit bool
}

// DefaultVerify is flux-core's implicit configuration.
var DefaultVerify = Verify{Hostname: verifyStrict, Core: verifyAllowExtra, GPU: verifyIgnore}

// off reports whether nothing is checked.
func (v Verify) off() bool {
	return v.Hostname == verifyIgnore && v.Core == verifyIgnore && v.GPU == verifyIgnore
}

// parseVerify reads resource.verify: "true", "false", or a JSON table.
func parseVerify(s string) (Verify, error) {
	switch s {
	case "true", "1":
		return Verify{verifyStrict, verifyStrict, verifyStrict, true}, nil
	case "false", "0":
		return Verify{verifyIgnore, verifyIgnore, verifyIgnore, true}, nil
	}
	var t map[string]any
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return Verify{}, fmt.Errorf("%w: resource.verify: want true, false or a table, not %s", ErrConfig, s)
	}
	return verifyTable(t)
}

// verifyTable reads a [resource.verify] table.
func verifyTable(t map[string]any) (Verify, error) {
	mode := func(key string, def verifyMode) (verifyMode, error) {
		v, ok := t[key]
		if !ok {
			return def, nil
		}
		s, _ := v.(string)
		if !slices.Contains(verifyModes, verifyMode(s)) {
			return "", fmt.Errorf("%w: resource.verify.%s: want strict, allow-extra, allow-missing or ignore, not %v", ErrConfig, key, v)
		}
		return verifyMode(s), nil
	}
	for k := range t {
		if !slices.Contains([]string{"default", "hostname", "core", "gpu"}, k) {
			return Verify{}, fmt.Errorf("%w: resource.verify.%s: unknown key (known: core, default, gpu, hostname)", ErrConfig, k)
		}
	}
	def, err := mode("default", verifyStrict)
	if err != nil {
		return Verify{}, err
	}
	v := Verify{Explicit: true}
	if v.Hostname, err = mode("hostname", def); err != nil {
		return Verify{}, err
	}
	if v.Core, err = mode("core", def); err != nil {
		return Verify{}, err
	}
	if v.GPU, err = mode("gpu", def); err != nil {
		return Verify{}, err
	}
	return v, nil
}

// check compares what a rank reported with its part of R and returns why
// it does not match ("" if it does).
func (v Verify) check(want rset.Node, got helloPayload) string {
	var why []string
	if v.Hostname != verifyIgnore && want.Hostname != "" && got.Hostname != "" && want.Hostname != got.Hostname {
		why = append(why, fmt.Sprintf("hostname is %s, not %s as configured", got.Hostname, want.Hostname))
	}
	for _, c := range []struct {
		what      string
		mode      verifyMode
		want, got string
	}{
		{"core", v.Core, want.Cores.String(), got.Cores},
		{"gpu", v.GPU, want.GPUs.String(), got.GPUs},
	} {
		if c.mode == verifyIgnore {
			continue
		}
		w, _ := idset.Parse(c.want)
		g, err := idset.Parse(c.got)
		if err != nil {
			continue // nothing reported
		}
		if missing := w.Difference(g); !missing.Empty() && c.mode != verifyAllowMissing {
			why = append(why, fmt.Sprintf("missing %s %s (found %s)", c.what, missing, orNone(g)))
		}
		if extra := g.Difference(w); !extra.Empty() && c.mode != verifyAllowExtra {
			why = append(why, fmt.Sprintf("extra %s %s", c.what, extra))
		}
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("rank %d (%s): %s", got.Rank, got.Hostname, strings.Join(why, ", "))
}

func orNone(s idset.Set) string {
	if s.Empty() {
		return "none"
	}
	return s.String()
}

// verifyRank checks a rank's report against the inventory and drains the
// rank if it does not match (rank 0, with the inventory defined).
func (inv *inventory) verifyRank(rep helloPayload) {
	if inv.R == nil || inv.cfg.Verify.off() || inv.cfg.ForceUp { // force-up: a fake inventory
		return
	}
	switch inv.method {
	case methodConfig, methodKVS, methodReload:
	case methodJob:
		if !inv.cfg.Verify.Explicit {
			return
		}
	default: // discovered: it is what the ranks reported
		return
	}
	var reason string
	if node, ok := inv.R.Node(uint(rep.Rank)); ok {
		reason = inv.cfg.Verify.check(node, rep)
	} else {
		// flux-core's rank drains itself when R has nothing for it
		reason = fmt.Sprintf("rank %d not found in R", rep.Rank)
	}
	if reason == "" {
		return
	}
	inv.log.Error("draining: " + reason)
	ranks := idset.Set{}
	ranks.Add(uint(rep.Rank))
	inv.applyDrain(ranks, float64(time.Now().UnixNano())/1e9, reason, 1)
	inv.reslog.post("drain", map[string]any{
		"idset":     ranks.String(),
		"nodelist":  inv.nodelist(ranks),
		"reason":    reason,
		"overwrite": 1,
	})
	inv.changed()
}
