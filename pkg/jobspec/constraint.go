package jobspec

import (
	"strings"
)

// Constraint operators (RFC 31, with the hostlist and ranks operators
// Flux supports).
const (
	OpProperties = "properties" // Values: required properties; "^p" forbids p
	OpHostlist   = "hostlist"   // Values: RFC 29 hostlists the resources must be in
	OpRanks      = "ranks"      // Values: RFC 22 idsets of broker ranks
	OpAnd        = "and"        // Args: all must hold
	OpOr         = "or"         // Args: one must hold
	OpNot        = "not"        // Args: none may hold
)

// Constraint is an RFC 31 job constraint: an operator with string values
// (properties, hostlist, ranks) or with nested constraints (and, or, not).
// A JSON object with several operators is read as their "and".
type Constraint struct {
	Op     string
	Values []string
	Args   []*Constraint
}

// isLogical reports whether op takes nested constraints.
func isLogical(op string) bool { return op == OpAnd || op == OpOr || op == OpNot }

// Object returns c as an RFC 31 JSON object.
func (c *Constraint) Object() map[string]any {
	if isLogical(c.Op) {
		l := make([]any, len(c.Args))
		for i, a := range c.Args {
			l[i] = a.Object()
		}
		return map[string]any{c.Op: l}
	}
	l := make([]any, len(c.Values))
	for i, v := range c.Values {
		l[i] = v
	}
	return map[string]any{c.Op: l}
}

// Validate checks c as Parse checks attributes.system.constraints.
func (c *Constraint) Validate() error {
	_, err := constraintFrom(c.Object(), nil, 0)
	return err
}

// propertyForbidden are the characters a property name may not contain
// (they are operators in the RFC 35 query syntax).
const propertyForbidden = "&'\"`|()"

// constraintFrom reads an RFC 31 constraint object.
func constraintFrom(v any, p *path, depth int) (*Constraint, error) {
	if depth > maxDepth {
		return nil, p.errf("constraint nested too deeply")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errf("must be a constraint object (RFC 31), not %s", typeName(v))
	}
	ops := sortedKeys(m)
	var cs []*Constraint
	for _, op := range ops {
		c, err := constraintOp(op, m[op], p.child(op), depth)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if len(cs) == 1 {
		return cs[0], nil
	}
	return &Constraint{Op: OpAnd, Args: cs}, nil
}

func constraintOp(op string, v any, p *path, depth int) (*Constraint, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, p.errf("must be an array, not %s", typeName(v))
	}
	c := &Constraint{Op: op}
	switch op {
	case OpAnd, OpOr, OpNot:
		c.Args = make([]*Constraint, len(l))
		for i, e := range l {
			a, err := constraintFrom(e, p.at(i), depth+1)
			if err != nil {
				return nil, err
			}
			c.Args[i] = a
		}
		return c, nil
	case OpProperties, OpHostlist, OpRanks:
	default:
		return nil, p.errf("unknown constraint operator %q (want properties, hostlist, ranks, and, or or not)", op)
	}
	c.Values = make([]string, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, p.at(i).errf("must be a string, not %s", typeName(e))
		}
		switch op {
		case OpProperties:
			name := strings.TrimPrefix(s, "^")
			if name == "" {
				return nil, p.at(i).errf("property name must not be empty")
			}
			if j := strings.IndexAny(name, propertyForbidden); j >= 0 {
				return nil, p.at(i).errf("invalid character %q in property %q", name[j], s)
			}
		case OpHostlist:
			if s == "" {
				return nil, p.at(i).errf("hostlist must not be empty")
			}
		case OpRanks:
			if _, err := parseIDSet(s); err != nil {
				return nil, p.at(i).errf("invalid idset %q: %v", s, err)
			}
		}
		c.Values[i] = s
	}
	return c, nil
}
