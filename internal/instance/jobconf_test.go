package instance

import "testing"

// TestJSONTableNumbers: a job's conf.json (flux batch --conf) gives
// integers as int64 and reals as float64, as a TOML file would, so
// that integer-only keys (inactive-num-limit) take it; what is not one
// JSON object is refused.
func TestJSONTableNumbers(t *testing.T) {
	tab, err := JSONTable([]byte(`{"job-manager":{"inactive-num-limit":10000,"x":1.5,"y":2e3,"l":[1,2.5]}}`))
	if err != nil {
		t.Fatal(err)
	}
	jm := tab["job-manager"].(map[string]any)
	if v, ok := jm["inactive-num-limit"].(int64); !ok || v != 10000 {
		t.Errorf("inactive-num-limit: %#v", jm["inactive-num-limit"])
	}
	if v, ok := jm["x"].(float64); !ok || v != 1.5 {
		t.Errorf("x: %#v", jm["x"])
	}
	if v, ok := jm["y"].(float64); !ok || v != 2000 {
		t.Errorf("y: %#v", jm["y"])
	}
	if l := jm["l"].([]any); l[0] != int64(1) || l[1] != 2.5 {
		t.Errorf("l: %#v", l)
	}
	for _, bad := range []string{`null`, `[1]`, `{"a":1} {"b":2}`, `{"a":`, ``} {
		if _, err := JSONTable([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
