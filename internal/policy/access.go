package policy

import (
	"encoding/json"
	"fmt"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Access is a policy.access table (flux-config-policy(5)): when it lists
// users or groups, only those users, and the members of those groups,
// may submit jobs (to the instance, or to the queue whose policy table
// holds it). The instance owner always may. Names are matched when a
// job is submitted, so a user created later is recognised without a
// reload.
type Access struct {
	path   string // the table's place in the configuration, for errors
	users  []string
	groups []string
	// warnings name users and groups not found when the table was read
	// (accepted: one may be created later, and flux-core accepts them)
	warnings []string
}

// restricts reports whether the table limits anyone.
func (a *Access) restricts() bool { return a != nil && (len(a.users) > 0 || len(a.groups) > 0) }

// parseAccess reads an access table at path.
func parseAccess(path string, raw json.RawMessage) (*Access, error) {
	var t map[string]json.RawMessage
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, invalid("%s must be a table, not %s", path, raw)
	}
	a := &Access{path: path}
	for key, v := range t {
		var list *[]string
		switch key {
		case "allow-user":
			list = &a.users
		case "allow-group":
			list = &a.groups
		default:
			return nil, invalid("%s.%s: unknown key (known: allow-group, allow-user)", path, key)
		}
		if err := json.Unmarshal(v, list); err != nil || string(v) == "null" {
			// flux-core refuses numbers too: a numeric id goes in quotes
			return nil, invalid("%s.%s must be an array of strings (user or group names, or numeric ids in quotes), not %s", path, key, v)
		}
		for _, name := range *list {
			if name == "" {
				return nil, invalid("%s.%s: a name is empty", path, key)
			}
		}
	}
	for _, u := range a.users {
		if _, err := strconv.ParseUint(u, 10, 32); err != nil {
			if _, err := user.Lookup(u); err != nil {
				a.warnings = append(a.warnings, fmt.Sprintf("%s.allow-user: there is no user %q on this host (yet)", path, u))
			}
		}
	}
	for _, g := range a.groups {
		if _, err := strconv.ParseUint(g, 10, 32); err != nil {
			if _, err := user.LookupGroup(g); err != nil {
				a.warnings = append(a.warnings, fmt.Sprintf("%s.allow-group: there is no group %q on this host (yet)", path, g))
			}
		}
	}
	return a, nil
}

// names resolves uids to user names and their groups' names, cached
// for the life of the configuration (a reload makes a new one).
type names struct {
	mu     sync.Mutex
	cached map[uint32]identity
}

type identity struct {
	user   string
	groups []string
}

func (n *names) of(uid uint32) identity {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id, ok := n.cached[uid]; ok {
		return id
	}
	id := identity{user: strconv.FormatUint(uint64(uid), 10)}
	if u, err := user.LookupId(id.user); err == nil {
		id.user = u.Username
		gids, _ := u.GroupIds()
		for _, gid := range gids {
			if g, err := user.LookupGroupId(gid); err == nil {
				id.groups = append(id.groups, g.Name)
			}
			id.groups = append(id.groups, gid)
		}
	}
	if n.cached == nil {
		n.cached = map[uint32]identity{}
	}
	if len(n.cached) > 4096 { // bounded: many distinct submitters only refill it
		clear(n.cached)
	}
	n.cached[uid] = id
	return id
}

// Warnings lists what the access tables name that this host does not
// know, for the log.
func (c *Config) Warnings() []string {
	var w []string
	if c.Access != nil {
		w = append(w, c.Access.warnings...)
	}
	for _, name := range c.Names() {
		if a := c.Queues[name].Access; a != nil {
			w = append(w, a.warnings...)
		}
	}
	return w
}

// CheckAccess says whether uid (not the instance owner) may submit to
// queue ("" for the anonymous queue): the queue's access table if it
// has one, else the instance's. The error (EPERM) names the table.
func (c *Config) CheckAccess(queue string, uid uint32) error {
	a := c.Access
	if q, ok := c.Queues[queue]; ok && q.Access != nil {
		a = q.Access
	}
	if !a.restricts() {
		return nil
	}
	id := c.names.of(uid)
	if slices.Contains(a.users, id.user) || slices.Contains(a.users, strconv.FormatUint(uint64(uid), 10)) {
		return nil
	}
	for _, g := range id.groups {
		if slices.Contains(a.groups, g) {
			return nil
		}
	}
	where := "this instance"
	if queue != "" {
		where = "queue " + queue
	}
	return flux.NewError(syscall.EPERM, fmt.Sprintf("user %s (uid %d) may not submit to %s: not in %s.allow-user or allow-group",
		id.user, uid, where, a.path))
}
