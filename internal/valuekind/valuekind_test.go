package valuekind

import "testing"

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "nothing (null)"}, {"x", `the string "x"`}, {true, "true"}, {int64(3), "the number 3"},
		{1.5, "the number 1.5"}, {[]any{1}, "an array"}, {map[string]any{}, "a table"},
		{[]map[string]any{}, "an array"},
	} {
		if got := Of(tc.v); got != tc.want {
			t.Errorf("Of(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
