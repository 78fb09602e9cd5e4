package rset

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// illegalPropertyChars may not appear in a property name (RFC 20).
const illegalPropertyChars = "!&'\"^`|()"

// CheckPropertyName returns an error wrapping ErrInvalid if name is not a
// valid property name: it must be non-empty UTF-8 without any of
// ! & ' " ^ ` | ( ). The '@' character is allowed; RFC 20 reserves the
// part after it for scheduler use.
func CheckPropertyName(name string) error {
	switch {
	case name == "":
		return errorf(ErrInvalid, "empty property name")
	case !utf8.ValidString(name):
		return errorf(ErrInvalid, "property name %q is not valid UTF-8", name)
	case strings.ContainsAny(name, illegalPropertyChars):
		i := strings.IndexAny(name, illegalPropertyChars)
		return errorf(ErrInvalid, "property name %q contains illegal character %q", name, name[i])
	}
	return nil
}

// Properties returns a copy of the property map: property name to the
// ranks that have it.
func (r *R) Properties() map[string]idset.Set { return cloneProps(r.props) }

// PropertyRanks returns the ranks that have property name; the set is
// empty for an unknown property.
func (r *R) PropertyRanks(name string) idset.Set { return r.props[name].Clone() }

// RankProperties returns the sorted names of the properties of rank.
func (r *R) RankProperties(rank uint) []string {
	var out []string
	for name, ranks := range r.props {
		if ranks.Contains(rank) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// SetProperty gives property name to ranks, in addition to the ranks that
// already have it. It fails with ErrInvalid for a bad name or an empty
// rank set and with ErrNotFound if some ranks are not in r.
func (r *R) SetProperty(name string, ranks idset.Set) error {
	if err := CheckPropertyName(name); err != nil {
		return err
	}
	if ranks.Empty() {
		return errorf(ErrInvalid, "property %s: no ranks given", name)
	}
	if missing := ranks.Difference(r.ranks); !missing.Empty() {
		return errorf(ErrNotFound, "property %s: ranks %s not found", name, missing)
	}
	if r.props == nil {
		r.props = make(map[string]idset.Set)
	}
	r.props[name] = r.props[name].Union(ranks)
	return nil
}

func cloneProps(p map[string]idset.Set) map[string]idset.Set {
	if p == nil {
		return nil
	}
	out := make(map[string]idset.Set, len(p))
	for k, v := range p {
		out[k] = v.Clone()
	}
	return out
}

// mergeProps returns the union of two property maps.
func mergeProps(a, b map[string]idset.Set) map[string]idset.Set {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	if out == nil {
		out = make(map[string]idset.Set, len(b))
	}
	for k, v := range b {
		out[k] = out[k].Union(v)
	}
	return out
}

// restrictProps returns p limited to ranks, without empty properties.
func restrictProps(p map[string]idset.Set, ranks idset.Set) map[string]idset.Set {
	var out map[string]idset.Set
	for k, v := range p {
		x := v.Intersect(ranks)
		if x.Empty() {
			continue
		}
		if out == nil {
			out = make(map[string]idset.Set, len(p))
		}
		out[k] = x
	}
	return out
}

func cloneRaw(m map[string]json.RawMessage) map[string]json.RawMessage {
	return maps.Clone(m)
}

func setRaw(m map[string]json.RawMessage, k string, v json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		m = make(map[string]json.RawMessage)
	}
	m[k] = v
	return m
}
