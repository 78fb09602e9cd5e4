package accounting

import (
	"os/user"
	"strconv"
)

// lookupUsername is uid's user name on this host.
func lookupUsername(uid uint32) (string, bool) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return "", false
	}
	return u.Username, true
}

// LookupUserid is a user name's uid on this host: for add-user without
// --userid.
func LookupUserid(name string) (uint32, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, errf(ErrInvalid, "user %s: no such user on this host: give --userid", name)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, errf(ErrInvalid, "user %s: uid %q is not a number", name, u.Uid)
	}
	return uint32(n), nil
}

// CheckName reports why name cannot be a user, bank or project name
// (kind says which) in the database, or nil.
func CheckName(kind, name string) error { return checkName(kind, name) }
