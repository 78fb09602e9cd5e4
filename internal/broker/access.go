package broker

import (
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/internal/valuekind"
)

// accessConfig is the configuration's [access] table
// (flux-config-access(5)), read at start and on each reload (new
// connections see the new one). A broker attribute of the same name (-S
// access.KEY=VALUE) wins over it.
type accessConfig struct {
	// allowGuest is allow-guest-user when the table sets it
	allowGuest *bool
	// allowRootOwner gives root the owner's role (allow-root-owner)
	allowRootOwner bool
	maxUserConns   int64 // max-user-connections (0: not set)
	maxUserPending int64 // max-user-pending (0: not set)
	// operators are the uids access.operators names, resolved from user
	// names when the table is read (a reload resolves them again)
	operators map[uint32]bool
	// operatorGids are the gids access.operator-groups names: a user
	// whose groups (primary or supplementary, from the group database
	// when the user connects) include one is an operator
	operatorGids []uint32
}

// accessKeys are the keys [access] may hold (private-mode and roles are
// flux-core's: private-mode is job-list's to act on, the broker checks
// its type; roles.admin's users and groups get the operator role, as
// operators and operator-groups do).
var accessKeys = []string{"allow-guest-user", "allow-root-owner", "max-user-connections", "max-user-pending",
	"operator-groups", "operators", "private-mode", "roles"}

// isOperator reports whether a connection from uid gets the operator
// role (message.RoleOperator).
func (ac *accessConfig) isOperator(uid uint32) bool {
	if ac.operators[uid] {
		return true
	}
	if len(ac.operatorGids) == 0 {
		return false
	}
	for _, gid := range groupIDs(uid) {
		if slices.Contains(ac.operatorGids, gid) {
			return true
		}
	}
	return false
}

// groupIDs returns the gids uid belongs to in the group database (its
// primary group first), or none if it has no passwd entry.
func groupIDs(uid uint32) []uint32 {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		ids = []string{u.Gid}
	}
	var out []uint32
	for _, id := range ids {
		if n, err := strconv.ParseUint(id, 10, 32); err == nil {
			out = append(out, uint32(n))
		}
	}
	return out
}

// parseIDList reads access.KEY, an array of names or numeric ids (as
// numbers or in quotes), resolving each name with lookup (which returns
// the numeric id as a string, as os/user does); what cannot be resolved
// is an error naming the key and the value.
func parseIDList(key, what string, v any, lookup func(string) (string, error)) ([]uint32, error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case []string:
		for _, s := range x {
			items = append(items, s)
		}
	default:
		return nil, fmt.Errorf("access.%s: want an array of %s names or numeric ids, not %s", key, what, valuekind.Of(v))
	}
	var ids []uint32
	for _, it := range items {
		switch x := it.(type) {
		case int64:
			if x < 0 || x >= 1<<32-1 {
				return nil, fmt.Errorf("access.%s: %d is not a valid %s id", key, x, what)
			}
			ids = append(ids, uint32(x))
		case string:
			if x == "" {
				return nil, fmt.Errorf("access.%s: a %s name is empty", key, what)
			}
			if n, err := strconv.ParseUint(x, 10, 32); err == nil {
				if n == 1<<32-1 {
					return nil, fmt.Errorf("access.%s: %q is not a valid %s id", key, x, what)
				}
				ids = append(ids, uint32(n))
				continue
			}
			id, err := lookup(x)
			if err != nil {
				return nil, fmt.Errorf("access.%s: there is no %s %q on this host", key, what, x)
			}
			n, err := strconv.ParseUint(id, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("access.%s: %s %q has id %q, not a number", key, what, x, id)
			}
			ids = append(ids, uint32(n))
		default:
			return nil, fmt.Errorf("access.%s: want %s names or numeric ids, got %s", key, what, valuekind.Of(it))
		}
	}
	return ids, nil
}

func lookupUID(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", err
	}
	return u.Uid, nil
}

func lookupGID(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", err
	}
	return g.Gid, nil
}

// CheckAccess checks the [access] table of a configuration (nil: none):
// flux config reload refuses a bad one.
func CheckAccess(toml map[string]any) error {
	_, err := parseAccess(toml)
	return err
}

// parseAccess reads the [access] table of a configuration (nil: none).
func parseAccess(toml map[string]any) (accessConfig, error) {
	var ac accessConfig
	raw, ok := toml["access"]
	if !ok {
		return ac, nil
	}
	t, ok := raw.(map[string]any)
	if !ok {
		return ac, fmt.Errorf("access: want a table, not %s", valuekind.Of(raw))
	}
	for k, v := range t {
		switch k {
		case "allow-guest-user", "allow-root-owner":
			b, ok := v.(bool)
			if !ok {
				return ac, fmt.Errorf("access.%s: want true or false, got %v", k, v)
			}
			if k == "allow-root-owner" {
				ac.allowRootOwner = b
			} else {
				ac.allowGuest = &b
			}
		case "max-user-connections":
			n, ok := v.(int64)
			if !ok || n < 1 {
				return ac, fmt.Errorf("access.max-user-connections: want a positive integer, got %v", v)
			}
			ac.maxUserConns = n
		case "max-user-pending":
			n, err := size.Parse(v)
			if err != nil {
				return ac, fmt.Errorf("access.max-user-pending: %v", err)
			}
			if n < 64<<10 {
				return ac, fmt.Errorf("access.max-user-pending: %v is less than 64K", v)
			}
			ac.maxUserPending = n
		case "operators":
			uids, err := parseIDList(k, "user", v, lookupUID)
			if err != nil {
				return ac, err
			}
			if ac.operators == nil {
				ac.operators = make(map[uint32]bool, len(uids))
			}
			for _, uid := range uids {
				ac.operators[uid] = true
			}
		case "operator-groups":
			gids, err := parseIDList(k, "group", v, lookupGID)
			if err != nil {
				return ac, err
			}
			ac.operatorGids = append(ac.operatorGids, gids...)
		case "private-mode":
			if _, ok := v.(bool); !ok {
				return ac, fmt.Errorf("access.private-mode: want true or false, got %v", v)
			}
		case "roles":
			if err := ac.parseRoles(v); err != nil {
				return ac, err
			}
		default:
			return ac, fmt.Errorf("access.%s: unknown key (the [access] table may hold %s)", k, strings.Join(accessKeys, ", "))
		}
	}
	return ac, nil
}

// parseRoles reads access.roles, flux-core's table of named roles: only
// admin, whose users and groups get the operator role here (what
// flux-core's admin role may do, and more: docs/ACCOUNTING.md).
func (ac *accessConfig) parseRoles(v any) error {
	roles, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("access.roles: want a table of roles, not %s", valuekind.Of(v))
	}
	for name, rv := range roles {
		if name != "admin" {
			return fmt.Errorf("access.roles.%s: unknown role (the only role is admin)", name)
		}
		rt, ok := rv.(map[string]any)
		if !ok {
			return fmt.Errorf("access.roles.admin: want a table with users and groups, not %s", valuekind.Of(rv))
		}
		for k, list := range rt {
			switch k {
			case "users":
				uids, err := parseIDList("roles.admin.users", "user", list, lookupUID)
				if err != nil {
					return err
				}
				if ac.operators == nil {
					ac.operators = make(map[uint32]bool, len(uids))
				}
				for _, uid := range uids {
					ac.operators[uid] = true
				}
			case "groups":
				gids, err := parseIDList("roles.admin.groups", "group", list, lookupGID)
				if err != nil {
					return err
				}
				ac.operatorGids = append(ac.operatorGids, gids...)
			default:
				return fmt.Errorf("access.roles.admin.%s: unknown key (a role has users and groups)", k)
			}
		}
	}
	return nil
}
