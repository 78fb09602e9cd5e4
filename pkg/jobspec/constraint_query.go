package jobspec

import (
	"fmt"
	"strings"
)

// ParseConstraintQuery compiles an RFC 35 constraint query, as given to
// flux submit --requires, into an RFC 31 constraint:
//
//   - terms are OPERATOR:OPERAND, or a bare OPERAND for "properties";
//     "host" and "hosts" mean "hostlist", "rank" means "ranks";
//   - a properties operand may list several properties separated by
//     commas, and properties terms joined by "and" are merged into one
//     list ("a b c" and "a,b,c" both give {"properties": ["a","b","c"]});
//   - terms separated by space, "&", "&&" or "and" are joined by AND,
//     by "|", "||" or "or" by OR (binding looser than AND); "not" negates
//     what follows, "-" negates a single term; parentheses group;
//   - an operand may be quoted with ' or " to hold spaces or operator
//     characters: hosts:'node[1-4]'.
//
// Errors wrap ErrInvalid and give the position of the problem.
func ParseConstraintQuery(q string) (*Constraint, error) {
	toks, err := lexQuery(q)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, queryErr(q, "empty constraint query")
	}
	qp := &queryParser{q: q, toks: toks}
	c, err := qp.or()
	if err != nil {
		return nil, err
	}
	if qp.pos < len(qp.toks) {
		t := qp.toks[qp.pos]
		if t.kind == tokRParen {
			return nil, queryErr(q, "unmatched ')' at position %d", t.at)
		}
		return nil, queryErr(q, "unexpected %q at position %d", t.text, t.at)
	}
	return c, nil
}

func queryErr(q, format string, args ...any) error {
	return &Error{Rule: fmt.Sprintf("constraint %q: %s", q, fmt.Sprintf(format, args...)), Kind: ErrInvalid}
}

type tokKind int

const (
	tokTerm tokKind = iota
	tokAnd
	tokOr
	tokNot
	tokNegate
	tokLParen
	tokRParen
)

type queryTok struct {
	kind tokKind
	text string
	at   int
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// keywordAt reports whether word starts at q[i] as a whole word.
func keywordAt(q string, i int, word string) bool {
	if !strings.HasPrefix(q[i:], word) {
		return false
	}
	j := i + len(word)
	return j == len(q) || !isWordByte(q[j])
}

func lexQuery(q string) ([]queryTok, error) {
	var toks []queryTok
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '(':
			toks = append(toks, queryTok{tokLParen, "(", i})
			i++
		case c == ')':
			toks = append(toks, queryTok{tokRParen, ")", i})
			i++
		case c == '-':
			toks = append(toks, queryTok{tokNegate, "-", i})
			i++
		case c == '&':
			n := 1
			if i+1 < len(q) && q[i+1] == '&' {
				n = 2
			}
			toks = append(toks, queryTok{tokAnd, q[i : i+n], i})
			i += n
		case c == '|':
			n := 1
			if i+1 < len(q) && q[i+1] == '|' {
				n = 2
			}
			toks = append(toks, queryTok{tokOr, q[i : i+n], i})
			i += n
		case keywordAt(q, i, "not"):
			toks = append(toks, queryTok{tokNot, "not", i})
			i += 3
		case keywordAt(q, i, "and"):
			toks = append(toks, queryTok{tokAnd, "and", i})
			i += 3
		case keywordAt(q, i, "or"):
			toks = append(toks, queryTok{tokOr, "or", i})
			i += 2
		default:
			start := i
			text, next, err := lexTerm(q, i)
			if err != nil {
				return nil, err
			}
			// "op:" followed by a term (usually quoted) is one term.
			if strings.HasSuffix(text, ":") {
				j := next
				for j < len(q) && (q[j] == ' ' || q[j] == '\t') {
					j++
				}
				if j >= len(q) || strings.IndexByte("()|&-", q[j]) >= 0 {
					return nil, queryErr(q, "missing operand after %q at position %d", text, start)
				}
				more, n, err := lexTerm(q, j)
				if err != nil {
					return nil, err
				}
				text, next = text+more, n
			}
			toks = append(toks, queryTok{tokTerm, text, start})
			i = next
		}
	}
	return toks, nil
}

// lexTerm reads a bare or quoted term starting at q[i].
func lexTerm(q string, i int) (string, int, error) {
	if c := q[i]; c == '\'' || c == '"' {
		end := strings.IndexByte(q[i+1:], c)
		if end < 0 {
			return "", 0, queryErr(q, "unclosed quote %c at position %d", c, i)
		}
		if end == 0 {
			return "", 0, queryErr(q, "empty quoted string at position %d", i)
		}
		return q[i+1 : i+1+end], i + end + 2, nil
	}
	j := i
	for j < len(q) && strings.IndexByte("()|&'\" \t\n\r\f\v", q[j]) < 0 {
		j++
	}
	return q[i:j], j, nil
}

type queryParser struct {
	q    string
	toks []queryTok
	pos  int
}

func (qp *queryParser) peek() (queryTok, bool) {
	if qp.pos < len(qp.toks) {
		return qp.toks[qp.pos], true
	}
	return queryTok{}, false
}

func (qp *queryParser) or() (*Constraint, error) {
	left, err := qp.and()
	if err != nil {
		return nil, err
	}
	for {
		t, ok := qp.peek()
		if !ok || t.kind != tokOr {
			return left, nil
		}
		qp.pos++
		right, err := qp.and()
		if err != nil {
			return nil, err
		}
		if left.Op == OpOr {
			left.Args = append(left.Args, right)
		} else {
			left = &Constraint{Op: OpOr, Args: []*Constraint{left, right}}
		}
	}
}

func (qp *queryParser) and() (*Constraint, error) {
	left, err := qp.unary()
	if err != nil {
		return nil, err
	}
	for {
		t, ok := qp.peek()
		if !ok || t.kind == tokOr || t.kind == tokRParen {
			return left, nil
		}
		if t.kind == tokAnd {
			qp.pos++
		}
		right, err := qp.unary()
		if err != nil {
			return nil, err
		}
		left = combineAnd(left, right)
	}
}

// combineAnd joins two constraints with AND: an existing "and" absorbs
// the right side, and adjacent properties terms merge into one list.
func combineAnd(left, right *Constraint) *Constraint {
	if left.Op == OpAnd {
		left.Args = append(left.Args, right)
		return left
	}
	if left.Op == OpProperties && right.Op == OpProperties {
		left.Values = append(left.Values, right.Values...)
		return left
	}
	return &Constraint{Op: OpAnd, Args: []*Constraint{left, right}}
}

func (qp *queryParser) unary() (*Constraint, error) {
	t, ok := qp.peek()
	if !ok {
		return nil, queryErr(qp.q, "unexpected end of query")
	}
	qp.pos++
	switch t.kind {
	case tokNot:
		c, err := qp.unary()
		if err != nil {
			return nil, err
		}
		return &Constraint{Op: OpNot, Args: []*Constraint{c}}, nil
	case tokNegate:
		n, ok := qp.peek()
		if !ok || n.kind != tokTerm {
			return nil, queryErr(qp.q, "'-' at position %d must be followed by a term (use 'not' to negate an expression)", t.at)
		}
		qp.pos++
		c, err := qp.term(n)
		if err != nil {
			return nil, err
		}
		return &Constraint{Op: OpNot, Args: []*Constraint{c}}, nil
	case tokLParen:
		c, err := qp.or()
		if err != nil {
			return nil, err
		}
		n, ok := qp.peek()
		if !ok || n.kind != tokRParen {
			return nil, queryErr(qp.q, "unclosed '(' at position %d", t.at)
		}
		qp.pos++
		return c, nil
	case tokTerm:
		return qp.term(t)
	}
	return nil, queryErr(qp.q, "unexpected %q at position %d", t.text, t.at)
}

var queryOperatorAlias = map[string]string{
	"host":  OpHostlist,
	"hosts": OpHostlist,
	"rank":  OpRanks,
}

func (qp *queryParser) term(t queryTok) (*Constraint, error) {
	op, operand, hasOp := strings.Cut(t.text, ":")
	if !hasOp {
		op, operand = OpProperties, t.text
	} else {
		if op == "" {
			return nil, queryErr(qp.q, "missing operator before ':' at position %d", t.at)
		}
		for i := 0; i < len(op); i++ {
			if c := op[i]; !isWordByte(c) && c != '.' && c != '+' && c != '@' && c != '-' {
				return nil, queryErr(qp.q, "invalid character %q in operator %q", c, op)
			}
		}
		if alias, ok := queryOperatorAlias[op]; ok {
			op = alias
		}
	}
	if operand == "" {
		return nil, queryErr(qp.q, "missing operand for %q at position %d", op, t.at)
	}
	if op == OpProperties {
		return &Constraint{Op: op, Values: strings.Split(operand, ",")}, nil
	}
	return &Constraint{Op: op, Values: []string{operand}}, nil
}
