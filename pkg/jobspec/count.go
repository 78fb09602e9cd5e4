package jobspec

import (
	"fmt"
	"strconv"
	"strings"
)

// Min returns the smallest count c accepts (0 if c is malformed).
func (c Count) Min() int {
	switch {
	case c.Range != nil:
		return c.Range.Min
	case c.Set != "":
		r, err := parseCountString(c.Set)
		if err != nil {
			return 0
		}
		return r.Min
	}
	return c.Fixed
}

// IsFixed reports whether c is a single fixed number.
func (c Count) IsFixed() bool { return c.Range == nil && c.Set == "" }

// String returns c as it appears in a document: "4", "2-32:2:*",
// "{min: 2, max: 8, operator: +, operand: 2}".
func (c Count) String() string {
	switch {
	case c.Range != nil:
		r := c.Range
		s := fmt.Sprintf("{min: %d", r.Min)
		if r.Max != 0 {
			s += fmt.Sprintf(", max: %d", r.Max)
		}
		if r.Operator != "" {
			s += fmt.Sprintf(", operator: %s", r.Operator)
		}
		if r.Operand != 0 {
			s += fmt.Sprintf(", operand: %d", r.Operand)
		}
		return s + "}"
	case c.Set != "":
		return c.Set
	}
	return strconv.Itoa(c.Fixed)
}

// validate checks c against RFC 14.
func (c Count) validate(p *path) error {
	switch {
	case c.Range != nil && c.Set != "":
		return p.errf("only one form of count may be given")
	case c.Range != nil:
		return c.Range.validate(p)
	case c.Set != "":
		if _, err := parseCountString(c.Set); err != nil {
			return p.errf("invalid count %q: %v", c.Set, err)
		}
		return nil
	}
	if c.Fixed < 1 {
		return p.errf("must be >= 1")
	}
	return nil
}

// validate checks the range dictionary rules: min >= 1, max >= min,
// operator and operand given together, operator one of + * ^, and an
// operand (and, for ^, a min) of at least 2 where 1 would never step.
func (r *CountRange) validate(p *path) error {
	if r.Min < 1 {
		return p.child("min").errf("must be >= 1")
	}
	if r.Max < 0 {
		return p.child("max").errf("must be >= 1")
	}
	if r.Max != 0 && r.Max < r.Min {
		return p.child("max").errf("must be >= min (%d)", r.Min)
	}
	if r.Operand < 0 {
		return p.child("operand").errf("must be >= 1")
	}
	if r.Operator == "" && r.Operand != 0 {
		return p.child("operator").errf("is required with operand")
	}
	if r.Operator != "" && r.Operand == 0 {
		return p.child("operand").errf("is required with operator")
	}
	switch r.Operator {
	case "", "+":
	case "*", "^":
		if r.Operand < 2 {
			return p.child("operand").errf("must be >= 2 with operator %q", r.Operator)
		}
		if r.Operator == "^" && r.Min < 2 {
			return p.child("min").errf(`must be >= 2 with operator "^"`)
		}
	default:
		return p.child("operator").errf(`must be one of "+", "*" or "^", not %q`, r.Operator)
	}
	return nil
}

// parseCountString reads the string form of a count: an RFC 22 idset of
// positive counts ("4,9,16,25", "2-8", "[1-3]"), or an RFC 45 range
// "MIN+" or "MIN-MAX" optionally followed by ":OPERAND" and ":OPERATOR".
// The result is the equivalent range dictionary (for an idset, only Min
// is meaningful).
func parseCountString(s string) (CountRange, error) {
	if ids, err := parseIDSet(s); err == nil {
		if ids[0].lo < 1 {
			return CountRange{}, fmt.Errorf("counts must be >= 1")
		}
		return CountRange{Min: ids[0].lo}, nil
	}
	body := s
	if strings.HasPrefix(body, "[") && strings.HasSuffix(body, "]") {
		body = body[1 : len(body)-1]
	}
	parts := strings.Split(body, ":")
	if len(parts) > 3 {
		return CountRange{}, fmt.Errorf("want an idset or MIN+ / MIN-MAX[:OPERAND[:OPERATOR]]")
	}
	var r CountRange
	var err error
	switch first := parts[0]; {
	case strings.HasSuffix(first, "+"):
		r.Min, err = parsePositive(first[:len(first)-1])
	case strings.Contains(first, "-"):
		lo, hi, _ := strings.Cut(first, "-")
		if r.Min, err = parsePositive(lo); err == nil {
			r.Max, err = parsePositive(hi)
		}
	default:
		err = fmt.Errorf("want an idset or MIN+ / MIN-MAX[:OPERAND[:OPERATOR]]")
	}
	if err != nil {
		return CountRange{}, err
	}
	if len(parts) > 1 {
		if r.Operand, err = parsePositive(parts[1]); err != nil {
			return CountRange{}, fmt.Errorf("operand: %v", err)
		}
		r.Operator = "+"
	}
	if len(parts) > 2 {
		r.Operator = parts[2]
	}
	if err := r.validate(nil); err != nil {
		e := err.(*Error)
		return CountRange{}, fmt.Errorf("%s %s", e.Path, e.Rule)
	}
	return r, nil
}

// parsePositive reads a decimal integer >= 1 without sign or leading zero.
func parsePositive(s string) (int, error) {
	if s == "" || s[0] == '0' {
		return 0, fmt.Errorf("%q is not an integer >= 1", s)
	}
	n, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// parseDecimal reads a non-negative decimal integer: digits only, no
// leading zero (except "0" itself).
func parseDecimal(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a decimal integer", s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

type idRange struct{ lo, hi int }

// parseIDSet reads an RFC 22 idset: comma-separated ids and hyphenated
// ranges of non-negative decimal integers in ascending order without
// repeats, optionally in square brackets.
func parseIDSet(s string) ([]idRange, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	if s == "" {
		return nil, fmt.Errorf("empty idset")
	}
	var out []idRange
	last := -1
	for _, item := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parseDecimal(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parseDecimal(hi); err != nil {
				return nil, err
			}
			if b <= a {
				return nil, fmt.Errorf("range %q is not ascending", item)
			}
		}
		if a <= last {
			return nil, fmt.Errorf("ids must be unique and in ascending order")
		}
		last = b
		out = append(out, idRange{a, b})
	}
	return out, nil
}
