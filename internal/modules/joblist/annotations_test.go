package joblist

import "testing"

// TestSetAnnotations: a non-empty object is kept compact; an empty one,
// null, another type or bad JSON clears the annotations.
func TestSetAnnotations(t *testing.T) {
	for in, want := range map[string]string{
		`{"sched":{"resource_summary":"rank0/core0"}}`: `{"sched":{"resource_summary":"rank0/core0"}}`,
		`{ "user" : { "x" : [1, 2] } }`:                `{"user":{"x":[1,2]}}`,
		`{}`:                                           "",
		`null`:                                         "",
		`[1]`:                                          "",
		`{"a":`:                                        "",
		``:                                             "",
	} {
		r := &record{annotations: "old"}
		r.setAnnotations([]byte(in))
		if r.annotations != want {
			t.Errorf("setAnnotations(%q) = %q, want %q", in, r.annotations, want)
		}
	}
	r := &record{}
	s := &service{}
	s.allocAnnotations(r, []byte(`{"annotations":{"sched":{"reason_pending":"x"}},"other":1}`))
	if r.annotations != `{"sched":{"reason_pending":"x"}}` {
		t.Errorf("allocAnnotations kept %q", r.annotations)
	}
}
