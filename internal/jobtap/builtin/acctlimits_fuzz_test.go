package builtin

import (
	"encoding/json"
	"testing"
)

// FuzzAccountingConfig: the [accounting] table parser refuses what it
// cannot use and never panics; what it accepts it accepts again.
func FuzzAccountingConfig(f *testing.F) {
	for _, s := range []string{
		`{"accounting":{"max-active-jobs":4,"banks":{"physics":{"max-nodes":2}},"users":{"root":{"exempt":true}}}}`,
		`{"accounting":{"users":{"root:physics":{"max-running-jobs":1,"expedite":true}}}}`,
		`{"accounting":{"max-cores":-1}}`, `{"accounting":[]}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		a := &AccountLimits{}
		apply, err := a.ConfigUpdate(data)
		if err != nil {
			return
		}
		if apply == nil {
			t.Fatalf("%s: accepted with no apply", data)
		}
		if _, err := (&AccountLimits{}).ConfigUpdate(data); err != nil {
			t.Fatalf("%s: accepted once, refused again: %v", data, err)
		}
	})
}
