package jobspec

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Dependency is an RFC 26 job dependency: Scheme names the kind of
// dependency ("afterok", "begin-time", "singleton" ...) and gives Value
// its meaning (a jobid, a timestamp ...). Options holds any further keys
// of the dependency object (e.g. "type" and "scope" for the string and
// fluid schemes), as generic JSON values.
type Dependency struct {
	Scheme  string
	Value   string
	Options map[string]any
}

// ParseDependencyURI reads the command line form of a dependency,
//
//	SCHEME:VALUE[?KEY=VAL[&KEY=VAL...]]
//
// ("afterok:ƒ2oLkTLb", "string:foo?type=out", "singleton"), as flux
// submit --dependency does: the scheme is lower-cased, the query (keys
// separated by & or ;) is percent-decoded, values that read as numbers
// become numbers, and a key given more than once becomes a list.
func ParseDependencyURI(uri string) (Dependency, error) {
	bad := func(why string) (Dependency, error) {
		return Dependency{}, &Error{Rule: fmt.Sprintf("invalid dependency URI %q: %s", uri, why), Kind: ErrInvalid}
	}
	scheme, rest, _ := strings.Cut(uri, ":")
	if !validScheme(scheme) {
		return bad("want SCHEME:VALUE, with a SCHEME of letters, digits, '+', '-' and '.' starting with a letter")
	}
	d := Dependency{Scheme: strings.ToLower(scheme)}
	value, query, hasQuery := strings.Cut(rest, "?")
	d.Value = value
	if !hasQuery {
		return d, nil
	}
	for _, item := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return bad(fmt.Sprintf("query item %q is not KEY=VAL", item))
		}
		var err error
		if k, err = url.QueryUnescape(k); err != nil {
			return bad(err.Error())
		}
		if v, err = url.QueryUnescape(v); err != nil {
			return bad(err.Error())
		}
		if k == "scheme" || k == "value" {
			return bad(fmt.Sprintf("query key %q is reserved", k))
		}
		if d.Options == nil {
			d.Options = make(map[string]any)
		}
		x := queryValue(v)
		switch prev := d.Options[k].(type) {
		case nil:
			d.Options[k] = x
		case []any:
			d.Options[k] = append(prev, x)
		default:
			d.Options[k] = []any{prev, x}
		}
	}
	return d, nil
}

func validScheme(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// queryValue turns a query value into an int64 or float64 if it reads as
// one, and leaves it a string otherwise.
func queryValue(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	// Plain decimal notation only: not "inf", "nan" or hexadecimal.
	if strings.Trim(s, "0123456789.eE+-") != "" {
		return s
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) {
		return f
	}
	return s
}

// URI returns d in the command line form ParseDependencyURI reads, with
// option keys sorted.
func (d Dependency) URI() string {
	s := d.Scheme + ":" + d.Value
	if len(d.Options) == 0 {
		return s
	}
	keys := make([]string, 0, len(d.Options))
	for k := range d.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var q []string
	for _, k := range keys {
		vals, ok := d.Options[k].([]any)
		if !ok {
			vals = []any{d.Options[k]}
		}
		for _, v := range vals {
			q = append(q, url.QueryEscape(k)+"="+url.QueryEscape(fmt.Sprint(v)))
		}
	}
	return s + "?" + strings.Join(q, "&")
}

// Object returns d as an RFC 26 dependency object.
func (d Dependency) Object() map[string]any {
	m := make(map[string]any, 2+len(d.Options))
	for k, v := range d.Options {
		m[k] = v
	}
	m["scheme"] = d.Scheme
	m["value"] = d.Value
	return m
}

// dependenciesFrom reads attributes.system.dependencies: a non-empty
// array of objects, each with string "scheme" (not empty) and "value".
func dependenciesFrom(v any, p *path) ([]Dependency, error) {
	l, err := asList(v, p)
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, p.errf("must not be empty (leave the key out for no dependencies)")
	}
	deps := make([]Dependency, len(l))
	for i, e := range l {
		ep := p.at(i)
		m, err := asMap(e, ep)
		if err != nil {
			return nil, err
		}
		sv, ok := m["scheme"]
		if !ok {
			return nil, missing(ep.child("scheme"))
		}
		if deps[i].Scheme, err = asName(sv, ep.child("scheme")); err != nil {
			return nil, err
		}
		vv, ok := m["value"]
		if !ok {
			return nil, missing(ep.child("value"))
		}
		s, ok := vv.(string)
		if !ok {
			return nil, ep.child("value").errf("must be a string, not %s", typeName(vv))
		}
		deps[i].Value = s
		for k, x := range m {
			if k == "scheme" || k == "value" {
				continue
			}
			if deps[i].Options == nil {
				deps[i].Options = make(map[string]any)
			}
			deps[i].Options[k] = x
		}
	}
	return deps, nil
}
