package accounting

import (
	"math"
	"time"
)

// Classic fair-share (issue 25, flux-accounting's and Slurm's classic
// formula). Each association is entitled to a fraction of the machine,
// its normalized shares S: its shares over the shares of the active
// associations in its bank, times its bank's shares over those of the
// bank's active siblings, and so on up to the root. Its normalized
// usage U is its decayed core-hours over every association's. Its
// fair-share factor is 2^(-U/S): 1 for an association that used
// nothing, 0.5 for one that used exactly its entitlement, towards 0 for
// one far above it (and 0 for one with no shares at all).

// AssocKey names an association: a user (by uid) in a bank.
type AssocKey struct {
	Userid uint32
	Bank   string
}

// DefaultHalfLife is the usage decay half-life when none is configured
// ([accounting.fairshare] decay-half-life).
const DefaultHalfLife = 7 * 24 * time.Hour

// Decayed is coreHours charged age ago, decayed with halfLife: half of
// it counts after one half-life, a quarter after two. A halfLife of 0
// means no decay.
func Decayed(coreHours float64, age, halfLife time.Duration) float64 {
	if halfLife <= 0 || age <= 0 {
		return coreHours
	}
	return coreHours * math.Exp2(-float64(age)/float64(halfLife))
}

// FairShare computes every active association's fair-share factor, in
// [0,1], from the bank hierarchy, the associations and their decayed
// usage (core-hours; associations missing from usage used nothing).
// Inactive banks and associations get no factor and count in no
// sibling's normalization. It is a pure function: the accounting module
// calls it after each pass over the job archive.
func FairShare(banks []Bank, assocs []Association, usage map[AssocKey]float64) map[AssocKey]float64 {
	// sum of the active children's shares, per bank (in float64: a
	// database written before shares were bounded may hold banks whose
	// int64 sum wraps)
	byName := make(map[string]*Bank, len(banks))
	childShares := make(map[string]float64, len(banks))
	for i := range banks {
		b := &banks[i]
		byName[b.Name] = b
		if b.Active && b.Parent != "" {
			childShares[b.Parent] += float64(b.Shares)
		}
	}
	// the banks' normalized shares, memoized down the tree
	norm := make(map[string]float64, len(banks))
	var bankNorm func(name string, depth int) float64
	bankNorm = func(name string, depth int) float64 {
		if v, ok := norm[name]; ok {
			return v
		}
		b := byName[name]
		v := 0.0
		switch {
		case b == nil || !b.Active || depth > len(banks):
		case b.Parent == "":
			v = 1
		case childShares[b.Parent] > 0:
			v = float64(b.Shares) / childShares[b.Parent] * bankNorm(b.Parent, depth+1)
		}
		norm[name] = v
		return v
	}
	assocShares := make(map[string]float64, len(banks))
	total := 0.0
	for i := range assocs {
		a := &assocs[i]
		if !a.Active {
			continue
		}
		assocShares[a.Bank] += float64(a.Shares)
		total += usage[AssocKey{a.Userid, a.Bank}]
	}
	out := make(map[AssocKey]float64, len(assocs))
	for i := range assocs {
		a := &assocs[i]
		if !a.Active {
			continue
		}
		k := AssocKey{a.Userid, a.Bank}
		s := 0.0
		if assocShares[a.Bank] > 0 {
			s = float64(a.Shares) / assocShares[a.Bank] * bankNorm(a.Bank, 0)
		}
		u := 0.0
		if total > 0 {
			u = usage[k] / total
		}
		switch {
		case u == 0:
			out[k] = 1
		case s == 0:
			out[k] = 0
		default:
			out[k] = math.Exp2(-u / s)
		}
	}
	return out
}
