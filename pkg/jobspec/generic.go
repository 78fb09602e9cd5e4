package jobspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// A jobspec document is first decoded into generic values, the same for
// YAML and JSON input: nil, bool, string, int64, float64, []any and
// map[string]any. Integers and floating point numbers stay distinct so
// that "count: 2" and "count: 2.0" can be told apart, as Flux does.

// Limits that keep hostile input (deep nesting, YAML alias bombs) from
// exhausting the stack, memory or time. A YAML document may expand to at
// most maxAliasNodes nodes more than its length in bytes (which bounds the
// nodes it can hold without aliases).
const (
	maxDepth      = 1000
	maxAliasNodes = 1 << 16
)

func syntaxErr(format string, args ...any) *Error {
	return &Error{Rule: fmt.Sprintf(format, args...), Kind: ErrSyntax}
}

// decodeDocument decodes data, JSON or YAML, into a generic value. Input
// whose first non-space byte is '{' is read as JSON first, then as YAML
// (a flow mapping) if it is not valid JSON.
func decodeDocument(data []byte) (any, error) {
	switch jsonwire.KindOf(data) {
	case jsonwire.KindEnd:
		return nil, syntaxErr("empty document")
	case jsonwire.KindObject:
		v, jerr := decodeJSON(data)
		if jerr == nil {
			return v, nil
		}
		var e *Error
		if errors.As(jerr, &e) && e.Kind != ErrSyntax {
			return nil, jerr // well-formed JSON with a bad value
		}
		if v, yerr := decodeYAML(data); yerr == nil {
			return v, nil
		}
		return nil, jerr
	}
	return decodeYAML(data)
}

// lineCol converts a byte offset into 1-based line and column numbers.
func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col := 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// decodeYAML decodes a single YAML document.
func decodeYAML(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, syntaxErr("empty document")
		}
		return nil, syntaxErr("%v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, syntaxErr("%v", err)
		}
		return nil, syntaxErr("yaml: line %d: a jobspec is a single YAML document", extra.Line)
	}
	c := &yamlConverter{maxNodes: len(data) + maxAliasNodes}
	return c.convert(&doc, nil, 0)
}

type yamlConverter struct {
	nodes, maxNodes int
}

func (c *yamlConverter) convert(n *yaml.Node, p *path, depth int) (any, error) {
	c.nodes++
	if c.nodes > c.maxNodes {
		return nil, p.errf("line %d: document too large (more than %d nodes after alias expansion)", n.Line, c.maxNodes)
	}
	if depth > maxDepth {
		return nil, p.errf("line %d: nested too deeply (more than %d levels)", n.Line, maxDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, syntaxErr("empty document")
		}
		return c.convert(n.Content[0], p, depth)
	case yaml.AliasNode:
		return c.convert(n.Alias, p, depth+1)
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, e := range n.Content {
			v, err := c.convert(e, p.at(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		if err := c.mapping(n, out, p, depth); err != nil {
			return nil, err
		}
		return out, nil
	case yaml.ScalarNode:
		return scalar(n, p)
	}
	return nil, p.errf("line %d: unsupported YAML node", n.Line)
}

// mapping adds the entries of mapping node n to out. Explicit keys win
// over keys brought in by a merge key ("<<"), as YAML specifies.
func (c *yamlConverter) mapping(n *yaml.Node, out map[string]any, p *path, depth int) error {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.AliasNode {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			return p.errf("line %d: mapping keys must be strings", kn.Line)
		}
		if kn.ShortTag() == "!!merge" {
			merges = append(merges, vn)
			continue
		}
		k := kn.Value
		if _, dup := out[k]; dup {
			return p.child(k).errf("line %d: duplicate key", kn.Line)
		}
		v, err := c.convert(vn, p.child(k), depth+1)
		if err != nil {
			return err
		}
		out[k] = v
	}
	for _, m := range merges {
		if m.Kind == yaml.AliasNode {
			m = m.Alias
		}
		var srcs []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			srcs = []*yaml.Node{m}
		case yaml.SequenceNode:
			srcs = m.Content
		default:
			return p.errf("line %d: merge key value must be a mapping or a list of mappings", m.Line)
		}
		for _, src := range srcs {
			if src.Kind == yaml.AliasNode {
				src = src.Alias
			}
			if src.Kind != yaml.MappingNode {
				return p.errf("line %d: merge key value must be a mapping or a list of mappings", src.Line)
			}
			merged := make(map[string]any)
			if err := c.mapping(src, merged, p, depth+1); err != nil {
				return err
			}
			for k, v := range merged {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return nil
}

func scalar(n *yaml.Node, p *path) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, p.errf("line %d: invalid boolean %q", n.Line, n.Value)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, p.errf("line %d: integer %s out of range", n.Line, n.Value)
		}
		return i, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, p.errf("line %d: invalid number %q", n.Line, n.Value)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, p.errf("line %d: %s is not a finite number (JSON cannot represent it)", n.Line, n.Value)
		}
		return f, nil
	case "!!str", "!!timestamp":
		return n.Value, nil
	}
	return nil, p.errf("line %d: unsupported YAML tag %s", n.Line, n.Tag)
}

// typeName names the JSON type of a generic value for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a floating point number"
	case []any:
		return "an array"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
