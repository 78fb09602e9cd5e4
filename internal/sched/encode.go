package sched

import (
	"slices"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// AppendR appends a as a complete RFC 20 R document (version 1): R_lite
// with one entry per distinct set of children ordered by lowest rank,
// starttime, expiration, nslots (when a.Slots is set), the nodelist and
// the properties of the allocated nodes. It writes the JSON directly: a
// one-core allocation costs a few hundred nanoseconds, not a trip through
// encoding/json.
func (p *Pool) AppendR(b []byte, a *Alloc) []byte {
	b = append(b, `{"version":1,"execution":{"R_lite":[`...)
	if len(a.Nodes) == 1 {
		na := &a.Nodes[0]
		nd := &p.nodes[na.node]
		var scratch [64]byte
		cores := appendIDsAt(scratch[:0], nd.cores, na.cores)
		gpus := appendIDsAt(cores[len(cores):], nd.gpus, na.gpus)
		rank := [1]uint32{nd.rank}
		b = appendGroup(b, rank[:], cores, gpus)
	} else {
		for k, g := range p.groups(a) {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendGroup(b, g.ranks, []byte(g.cores), []byte(g.gpus))
		}
	}
	// flux-core's key order: flux job info prints R as stored
	b = append(b, `],"starttime":`...)
	b = strconv.AppendFloat(b, a.Start, 'f', -1, 64)
	b = append(b, `,"expiration":`...)
	b = strconv.AppendFloat(b, a.Expiration, 'f', -1, 64)
	if a.Slots > 0 {
		b = append(b, `,"nslots":`...)
		b = strconv.AppendInt(b, int64(a.Slots), 10)
	}
	b = append(b, `,"nodelist":[`...)
	b = jsonwire.AppendPlainString(b, p.nodelist(a))
	b = append(b, ']')
	b = p.appendProperties(b, a)
	b = append(b, '}')
	if len(p.scheduling) > 0 {
		// the instance R's scheduling key goes with every allocation,
		// as flux-core's sched-simple copies it
		b = append(b, `,"scheduling":`...)
		b = append(b, p.scheduling...)
	}
	return append(b, '}')
}

// appendGroup appends one R_lite entry.
func appendGroup(b []byte, ranks []uint32, cores, gpus []byte) []byte {
	b = append(b, `{"rank":"`...)
	b = appendIDs(b, ranks)
	b = append(b, `","children":{"core":"`...)
	b = append(b, cores...)
	b = append(b, '"')
	if len(gpus) > 0 {
		b = append(b, `,"gpu":"`...)
		b = append(b, gpus...)
		b = append(b, '"')
	}
	return append(b, "}}"...)
}

// Summary returns the short form of a that flux R decode --short prints,
// e.g. "rank[0-1]/core[0-3],gpu0 rank2/core[0-1]": the scheduler's
// resource_summary annotation.
func (p *Pool) Summary(a *Alloc) string {
	if len(a.Nodes) == 1 {
		na := &a.Nodes[0]
		nd := &p.nodes[na.node]
		var scratch [96]byte
		b := append(scratch[:0], "rank"...)
		b = strconv.AppendUint(b, uint64(nd.rank), 10)
		b = append(b, "/core"...)
		b = appendSummaryIDs(b, nd.cores, na.cores)
		if na.gpus.count() > 0 {
			b = append(b, ",gpu"...)
			b = appendSummaryIDs(b, nd.gpus, na.gpus)
		}
		return string(b)
	}
	var b []byte
	for k, g := range p.groups(a) {
		if k > 0 {
			b = append(b, ' ')
		}
		b = append(b, "rank"...)
		b = appendBracketed(b, appendIDs(nil, g.ranks), len(g.ranks) > 1)
		b = append(b, "/core"...)
		b = appendBracketed(b, []byte(g.cores), strings.ContainsAny(g.cores, ",-"))
		if g.gpus != "" {
			b = append(b, ",gpu"...)
			b = appendBracketed(b, []byte(g.gpus), strings.ContainsAny(g.gpus, ",-"))
		}
	}
	return string(b)
}

// appendSummaryIDs appends the ids selected by sel, in brackets when
// there are several.
func appendSummaryIDs(b []byte, ids []uint32, sel bitset) []byte {
	several := sel.count() > 1
	if several {
		b = append(b, '[')
	}
	b = appendIDsAt(b, ids, sel)
	if several {
		b = append(b, ']')
	}
	return b
}

func appendBracketed(b, s []byte, brackets bool) []byte {
	if brackets {
		b = append(b, '[')
		b = append(b, s...)
		return append(b, ']')
	}
	return append(b, s...)
}

// group is one R_lite entry: ranks sharing the same children.
type group struct {
	ranks       []uint32
	cores, gpus string
}

func (p *Pool) groups(a *Alloc) []group {
	var out []group
	index := make(map[string]int)
	for k := range a.Nodes {
		na := &a.Nodes[k]
		nd := &p.nodes[na.node]
		cores, gpus := idsAt(nd.cores, na.cores), idsAt(nd.gpus, na.gpus)
		key := cores + "|" + gpus
		gi, ok := index[key]
		if !ok {
			gi = len(out)
			index[key] = gi
			out = append(out, group{cores: cores, gpus: gpus})
		}
		out[gi].ranks = append(out[gi].ranks, nd.rank)
	}
	return out
}

// idsAt encodes, as an idset, the ids at the positions set in sel.
func idsAt(ids []uint32, sel bitset) string { return string(appendIDsAt(nil, ids, sel)) }

// appendIDsAt appends the idset of the ids at the positions set in sel.
func appendIDsAt(b []byte, ids []uint32, sel bitset) []byte {
	first := true
	var lo, hi uint32
	for w, word := range sel {
		for word != 0 {
			pos := w*64 + trailingZeros(word)
			word &= word - 1
			id := ids[pos]
			switch {
			case first:
				lo, hi, first = id, id, false
			case id <= hi:
				// a share of a GPU listed already (gpushare.go: ids
				// repeat, ascending)
			case id == hi+1:
				hi = id
			default:
				b = appendRange(b, lo, hi)
				b = append(b, ',')
				lo, hi = id, id
			}
		}
	}
	if first {
		return b
	}
	return appendRange(b, lo, hi)
}

// appendIDs encodes ascending ids as an idset (an id repeated, as the
// shares of a GPU are, once).
func appendIDs(b []byte, ids []uint32) []byte {
	for k := 0; k < len(ids); {
		j := k
		for j+1 < len(ids) && (ids[j+1] == ids[j]+1 || ids[j+1] == ids[j]) {
			j++
		}
		if k > 0 {
			b = append(b, ',')
		}
		b = appendRange(b, ids[k], ids[j])
		k = j + 1
	}
	return b
}

func appendRange(b []byte, lo, hi uint32) []byte {
	b = strconv.AppendUint(b, uint64(lo), 10)
	if hi != lo {
		b = append(b, '-')
		b = strconv.AppendUint(b, uint64(hi), 10)
	}
	return b
}

// nodelist returns the hostlist of a's nodes in rank order, "" if some
// node has no hostname.
func (p *Pool) nodelist(a *Alloc) string {
	if len(a.Nodes) == 1 {
		return p.nodes[a.Nodes[0].node].host
	}
	hosts := make([]string, len(a.Nodes))
	for k := range a.Nodes {
		h := p.nodes[a.Nodes[k].node].host
		if h == "" {
			return ""
		}
		hosts[k] = h
	}
	return hostlist.New(hosts...).String()
}

// appendProperties appends the properties key for a's nodes, if they have
// any.
func (p *Pool) appendProperties(b []byte, a *Alloc) []byte {
	if len(p.props) == 0 {
		return b
	}
	var byName map[string][]uint32
	for k := range a.Nodes {
		nd := &p.nodes[a.Nodes[k].node]
		for _, name := range nd.props {
			if strings.HasPrefix(name, "+") {
				continue // instance-local: not passed to jobs (flux-core)
			}
			if byName == nil {
				byName = make(map[string][]uint32)
			}
			byName[name] = append(byName[name], nd.rank)
		}
	}
	if len(byName) == 0 {
		return b
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	b = append(b, `,"properties":{`...)
	for k, name := range names {
		if k > 0 {
			b = append(b, ',')
		}
		b = jsonwire.AppendPlainString(b, name)
		b = append(b, `:"`...)
		b = appendIDs(b, byName[name])
		b = append(b, '"')
	}
	return append(b, '}')
}
