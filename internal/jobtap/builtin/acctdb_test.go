package builtin

import (
	"errors"
	"syscall"
	"testing"
)

// The database's limits come after the configuration's; its flags add
// to them; only the owner may send it.
func TestAccountLimitsDatabase(t *testing.T) {
	a := newAccountLimits()
	a.Load(newTestHost(t), nil)
	apply, err := a.ConfigUpdate([]byte(`{"accounting":{"max-running-jobs":2,"max-nodes":4}}`))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	snap := []byte(`{"associations":[
		{"username":"alice","userid":1001,"bank":"a","active":true,"max_running_jobs":9,"exempt":true},
		{"username":"alice","userid":1001,"bank":"b","active":true,"expedite":true},
		{"username":"alice","userid":1001,"bank":"gone","active":false,"exempt":true}],"projects":[]}`)
	if _, err := a.dbUpdate(snap, 1001, false); !errors.Is(err, syscall.EPERM) {
		t.Errorf("a user sent the database: %v", err)
	}
	if _, err := a.dbUpdate(snap, 0, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bank           string
		running, nodes int
		exempt, exped  bool
	}{
		{"a", 9, 4, true, false},
		{"b", 2, 4, false, true},
		{"gone", 2, 4, false, false},
		{"other", 2, 4, false, false},
	} {
		_, running, nodes, _ := a.limits(assocKey{uid: 1001, bank: c.bank})
		exempt, exped := a.Privileges(1001, c.bank)
		if running != c.running || nodes != c.nodes || exempt != c.exempt || exped != c.exped {
			t.Errorf("bank %s: running %d nodes %d exempt %v expedite %v, want %+v", c.bank, running, nodes, exempt, exped, c)
		}
	}
}
