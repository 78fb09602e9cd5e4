package rset

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Encode returns r as a compact R JSON document, its keys in flux-core's
// order: R_lite, starttime, expiration, other keys of "execution" (such
// as nslots) in key order, nodelist, properties. R_lite has one entry per
// distinct set of children, ordered by lowest rank; "core" is always
// present and "gpu" only when not empty. The nodelist is one compressed
// hostlist in rank order, written when every rank has a hostname.
// starttime and expiration are always written; properties only when
// there are some. Opaque top-level keys follow, in key order.
func (r *R) Encode() []byte {
	b := make([]byte, 0, 128+64*len(r.groups))
	b = append(b, `{"version":1,"execution":{"R_lite":[`...)
	for i, g := range r.groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"rank":`...)
		b = jsonwire.AppendPlainString(b, g.ranks.String())
		b = append(b, `,"children":{"core":`...)
		b = jsonwire.AppendPlainString(b, g.ch.cores.String())
		if !g.ch.gpus.Empty() {
			b = append(b, `,"gpu":`...)
			b = jsonwire.AppendPlainString(b, g.ch.gpus.String())
		}
		b = append(b, "}}"...)
	}
	b = append(b, ']')
	b = append(b, `,"starttime":`...)
	b = appendFloat(b, r.start)
	b = append(b, `,"expiration":`...)
	b = appendFloat(b, r.expiration)
	b = appendRaw(b, r.execExtra)
	if r.HasHostnames() {
		b = append(b, `,"nodelist":[`...)
		if r.names != nil {
			b = jsonwire.AppendPlainString(b, r.names.encode())
		} else {
			b = append(b, `""`...)
		}
		b = append(b, ']')
	}
	if len(r.props) > 0 {
		b = append(b, `,"properties":{`...)
		for i, name := range slices.Sorted(maps.Keys(r.props)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonwire.AppendPlainString(b, name)
			b = append(b, ':')
			b = jsonwire.AppendPlainString(b, r.props[name].String())
		}
		b = append(b, '}')
	}
	b = append(b, '}')
	if r.scheduling != nil {
		b = append(b, `,"scheduling":`...)
		b = append(b, r.scheduling...)
	}
	b = appendRaw(b, r.extra)
	return append(b, '}')
}

// MarshalJSON encodes r (see Encode).
func (r *R) MarshalJSON() ([]byte, error) { return r.Encode(), nil }

// String returns the short form of r that flux R decode --short prints:
// one "rankIDS/coreIDS,gpuIDS" item per R_lite entry, separated by
// spaces, with an idset of more than one id in brackets, e.g.
// "rank[0-1]/core[0-3],gpu0 rank2/core[0-1]". An empty set gives "".
func (r *R) String() string {
	var sb strings.Builder
	for i, g := range r.groups {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("rank")
		sb.WriteString(bracketed(g.ranks))
		sb.WriteString(g.ch.short())
	}
	return sb.String()
}

// short returns "/core[0-3],gpu0", or "" when there are no children.
func (c children) short() string {
	var parts []string
	if !c.cores.Empty() {
		parts = append(parts, "core"+bracketed(c.cores))
	}
	if !c.gpus.Empty() {
		parts = append(parts, "gpu"+bracketed(c.gpus))
	}
	if len(parts) == 0 {
		return ""
	}
	return "/" + strings.Join(parts, ",")
}

func bracketed(s idset.Set) string { return s.Encode(true) }

func appendRaw(b []byte, m map[string]json.RawMessage) []byte {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = append(b, ',')
		b = jsonwire.AppendPlainString(b, k)
		b = append(b, ':')
		b = append(b, m[k]...)
	}
	return b
}

// appendFloat writes f as a JSON number in the shortest form that reads
// back the same: 0, 1676560542, 1796013269.4247489.
func appendFloat(b []byte, f float64) []byte {
	if math.Abs(f) < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'e', -1, 64)
}
