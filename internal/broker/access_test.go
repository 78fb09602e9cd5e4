package broker

import (
	"os/user"
	"slices"
	"strings"
	"testing"
)

// TestParseAccessOperators: access.operators and access.operator-groups
// take names and numeric ids, and refuse what they cannot resolve with
// the key and the value in the error.
func TestParseAccessOperators(t *testing.T) {
	if _, err := user.Lookup("root"); err != nil {
		t.Skip("no root user in the passwd database")
	}
	rootGroup := true
	if _, err := user.LookupGroup("root"); err != nil {
		rootGroup = false
	}
	for _, tc := range []struct {
		name      string
		table     map[string]any
		operators []uint32 // sorted
		gids      []uint32
		err       string
		needGroup bool
	}{
		{name: "names and ids", table: map[string]any{"operators": []any{"root", "1234", int64(4321)}}, operators: []uint32{0, 1234, 4321}},
		{name: "strings", table: map[string]any{"operators": []string{"5"}}, operators: []uint32{5}},
		{name: "empty list", table: map[string]any{"operators": []any{}}},
		{name: "groups", table: map[string]any{"operator-groups": []any{"root", int64(77)}}, gids: []uint32{0, 77}, needGroup: true},
		{name: "unknown user", table: map[string]any{"operators": []any{"root", "fluxgo-no-such-user"}},
			err: `access.operators: there is no user "fluxgo-no-such-user" on this host`},
		{name: "unknown group", table: map[string]any{"operator-groups": []any{"fluxgo-no-such-group"}},
			err: `access.operator-groups: there is no group "fluxgo-no-such-group" on this host`},
		{name: "not an array", table: map[string]any{"operators": "alice"},
			err: `access.operators: want an array of user names or numeric ids, not the string "alice"`},
		{name: "a table in the array", table: map[string]any{"operators": []any{map[string]any{}}},
			err: `access.operators: want user names or numeric ids, got a table`},
		{name: "negative id", table: map[string]any{"operators": []any{int64(-1)}},
			err: `access.operators: -1 is not a valid user id`},
		{name: "the unknown uid", table: map[string]any{"operator-groups": []any{"4294967295"}},
			err: `access.operator-groups: "4294967295" is not a valid group id`},
		{name: "empty name", table: map[string]any{"operators": []any{""}},
			err: `access.operators: a user name is empty`},
		// flux-core's spelling: the admin role's users and groups
		{name: "roles.admin with operators", table: map[string]any{"operators": []any{int64(7)},
			"roles": map[string]any{"admin": map[string]any{"users": []any{"root", int64(9)}}}}, operators: []uint32{0, 7, 9}},
		{name: "roles.admin groups", table: map[string]any{"roles": map[string]any{"admin": map[string]any{"groups": []any{"root"}}}},
			gids: []uint32{0}, needGroup: true},
		{name: "unknown role", table: map[string]any{"roles": map[string]any{"user": map[string]any{}}},
			err: `access.roles.user: unknown role (the only role is admin)`},
		{name: "unknown role key", table: map[string]any{"roles": map[string]any{"admin": map[string]any{"user": []any{}}}},
			err: `access.roles.admin.user: unknown key (a role has users and groups)`},
		{name: "unknown admin user", table: map[string]any{"roles": map[string]any{"admin": map[string]any{"users": []any{"fluxgo-no-such-user"}}}},
			err: `access.roles.admin.users: there is no user "fluxgo-no-such-user" on this host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needGroup && !rootGroup {
				t.Skip("no root group")
			}
			ac, err := parseAccess(map[string]any{"access": tc.table})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ops []uint32
			for uid := 0; uid < 5000; uid++ {
				if ac.operators[uint32(uid)] {
					ops = append(ops, uint32(uid))
				}
			}
			if !slices.Equal(ops, tc.operators) {
				t.Errorf("operators = %v, want %v", ops, tc.operators)
			}
			if !slices.Equal(ac.operatorGids, tc.gids) {
				t.Errorf("operator gids = %v, want %v", ac.operatorGids, tc.gids)
			}
		})
	}
}

// TestIsOperator: a user named is an operator, and so is a member of a
// group named (root is in group root); nobody else is.
func TestIsOperator(t *testing.T) {
	ac, err := parseAccess(map[string]any{"access": map[string]any{"operators": []any{int64(1234)}}})
	if err != nil {
		t.Fatal(err)
	}
	if !ac.isOperator(1234) || ac.isOperator(1235) || ac.isOperator(0) {
		t.Errorf("operators = [1234]: isOperator(1234, 1235, 0) = %v %v %v, want true false false",
			ac.isOperator(1234), ac.isOperator(1235), ac.isOperator(0))
	}
	var none accessConfig
	if none.isOperator(0) {
		t.Error("no [access] table: root is an operator")
	}
	if _, err := user.LookupGroup("root"); err != nil {
		t.Skip("no root group")
	}
	ac, err = parseAccess(map[string]any{"access": map[string]any{"operator-groups": []any{"root"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !ac.isOperator(0) {
		t.Error("operator-groups = [root]: root is not an operator")
	}
	if ac.isOperator(4000000) {
		t.Error("operator-groups = [root]: a uid with no passwd entry is an operator")
	}
}

// TestAccessUnknownKeyNamesOperators: the unknown-key error lists the
// new keys.
func TestAccessUnknownKeyNamesOperators(t *testing.T) {
	_, err := parseAccess(map[string]any{"access": map[string]any{"operator": []any{}}})
	if err == nil || !strings.Contains(err.Error(), "operator-groups, operators") {
		t.Fatalf("err = %v, want the key list to name operator-groups and operators", err)
	}
}
