package builtin

import (
	"strings"
	"testing"
)

func TestAccountLimitsConfig(t *testing.T) {
	a := newAccountLimits()
	apply, err := a.ConfigUpdate([]byte(`{"accounting":{"max-running-jobs":2,"banks":{"b":{"max-running-jobs":5}},"users":{"0":{"max-nodes":3},"0:b":{"max-running-jobs":7}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if _, running, nodes, _ := a.limits(assocKey{uid: 0}); running != 2 || nodes != 3 {
		t.Errorf("user 0, no bank: running %d nodes %d, want 2 and 3", running, nodes)
	}
	if _, running, _, _ := a.limits(assocKey{uid: 0, bank: "b"}); running != 7 {
		t.Errorf("user 0, bank b: running %d, want 7 (the association's own)", running)
	}
	if _, running, nodes, _ := a.limits(assocKey{uid: 5, bank: "b"}); running != 5 || nodes != 0 {
		t.Errorf("user 5, bank b: running %d nodes %d, want 5 and no limit", running, nodes)
	}
	for conf, want := range map[string]string{
		`{"accounting":{"max-jobs":1}}`:                   "unknown field",
		`{"accounting":{"max-nodes":-1}}`:                 "accounting.max-nodes=-1",
		`{"accounting":{"users":{"no-such-user-x":{}}}}`:  "unknown user",
		`{"accounting":{"banks":{"b":{"max-cores":-2}}}}`: "accounting.banks.b.max-cores=-2",
		`{"accounting":{"max-running-jobs":"many"}}`:      "cannot unmarshal",
	} {
		if _, err := a.ConfigUpdate([]byte(conf)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", conf, err, want)
		}
	}
}
