// Package valuekind names a decoded configuration or JSON value for an
// error message, in the words of the file it came from ("the string
// \"x\"", "the number 3", "an array", "a table") rather than Go's type
// names (string, []interface {}, map[string]interface {}).
package valuekind

import (
	"encoding/json"
	"fmt"
)

// Of describes v, a value decoded from TOML or JSON.
func Of(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing (null)"
	case string:
		if len(x) > 64 {
			x = x[:64] + "..."
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, json.Number:
		return fmt.Sprintf("the number %v", x)
	case []any, []map[string]any, []string:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return fmt.Sprintf("a value of %T", v)
	}
}
