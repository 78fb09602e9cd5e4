package policy

import "testing"

func TestPrivileges(t *testing.T) {
	c, err := Parse([]byte(`{"accounting":{"max-running-jobs":2,"expedite":false,
		"banks":{"ops":{"expedite":true}},
		"users":{"0":{"exempt":true},"0:ops":{"exempt":false}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		uid              uint32
		bank             string
		exempt, expedite bool
	}{
		{5, "", false, false},
		{5, "ops", false, true},
		{0, "", true, false},
		{0, "ops", false, true},
	} {
		if ex, exp := c.Privileges(tt.uid, tt.bank); ex != tt.exempt || exp != tt.expedite {
			t.Errorf("uid %d bank %q: exempt %v expedite %v, want %v %v", tt.uid, tt.bank, ex, exp, tt.exempt, tt.expedite)
		}
	}
	if _, err := Parse([]byte(`{"accounting":{"users":{"no-such-user-x":{}}}}`)); err == nil {
		t.Error("an unknown user was accepted")
	}
	if _, err := Parse([]byte(`{"accounting":{"exempt":"yes"}}`)); err == nil {
		t.Error("exempt=\"yes\" was accepted")
	}
}
