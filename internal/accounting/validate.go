package accounting

import (
	"fmt"
	"math"
	"os/user"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What the store accepts (flux account's bad input is refused naming
// the option, the value and the rule, and nothing stored changes).

// MaxNameLen bounds user, bank and project names, in bytes: Linux's
// LOGIN_NAME_MAX (256) less its terminating NUL, so that every user
// name the host can have fits, and a bank or project name no longer
// than a user's. flux-accounting's SQLite columns have no bound.
const MaxNameLen = 255

// MaxShares bounds a bank's or an association's shares, and MaxLimit
// every association limit (max-running-jobs, max-active-jobs,
// max-nodes, max-cores): 2^31-1, a 32-bit signed integer, which every
// database column and every platform's int holds. The fair-share pass
// sums shares in float64, so no number of banks at the maximum wraps.
const (
	MaxShares = math.MaxInt32
	MaxLimit  = math.MaxInt32
)

// MaxUserid is the largest uid a user may have: (uid_t)-1, 4294967295,
// is "no uid" to the kernel (setuid(-1) changes nothing).
const MaxUserid = math.MaxUint32 - 1

// checkName refuses names that would not survive a command line, a
// "user:bank" configuration key or a comma-separated list, names that
// are not valid UTF-8 (a byte that is no character would print as
// U+FFFD, another name's spelling), and names longer than MaxNameLen.
func checkName(kind, name string) error {
	if name == "" {
		return errf(ErrInvalid, "%s name is empty", kind)
	}
	if len(name) > MaxNameLen {
		return errf(ErrInvalid, "%s name %.32q... is %d bytes: at most %d are allowed", kind, name, len(name), MaxNameLen)
	}
	if !utf8.ValidString(name) {
		return errf(ErrInvalid, "%s name %q is not valid UTF-8", kind, name)
	}
	if strings.ContainsRune(name, utf8.RuneError) {
		// what JSON makes of bytes that are not UTF-8
		return errf(ErrInvalid, "%s name %q holds U+FFFD, the replacement of bytes that are not valid UTF-8", kind, name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || r == ':' || r == ',' || !unicode.IsPrint(r) {
			return errf(ErrInvalid, "%s name %q: only printable characters, and no spaces, ':' or ',', are allowed", kind, name)
		}
	}
	return nil
}

// checkShares refuses shares below 0 or above MaxShares.
func checkShares(who string, shares int64) error {
	if shares < 0 || shares > MaxShares {
		return errf(ErrInvalid, "%s: shares=%d: want 0 to %d", who, shares, MaxShares)
	}
	return nil
}

// checkLimits refuses a limit below 0 (but -1, to unset it, when
// allowUnset) or above MaxLimit.
func checkLimits(who string, l Limits, allowUnset bool) error {
	for _, f := range l.fields() {
		if *f.v == nil {
			continue
		}
		v := **f.v
		switch {
		case v < 0 && !(allowUnset && v == -1):
			if allowUnset {
				return errf(ErrInvalid, "%s: %s=%d: want 0 (no limit) to %d, or -1 to unset it", who, f.name, v, MaxLimit)
			}
			return errf(ErrInvalid, "%s: %s=%d: want 0 (no limit) to %d", who, f.name, v, MaxLimit)
		case v > MaxLimit:
			return errf(ErrInvalid, "%s: %s=%d: at most %d is allowed (0 is no limit)", who, f.name, v, MaxLimit)
		}
	}
	return nil
}

// checkUserid refuses (uid_t)-1.
func checkUserid(who string, uid uint32) error {
	if uid > MaxUserid {
		return errf(ErrInvalid, "%s: --userid=%d: want a uid from 0 to %d (%d is no uid)", who, uid, MaxUserid, uint64(math.MaxUint32))
	}
	return nil
}

// CheckHostUserid refuses a uid for username that this host says is
// someone else's: username is a host user with another uid, or uid is
// another host user's. A name and uid the host does not know pass (a
// user of another cluster sharing the database). The accounting module
// calls it for add-user and edit-user --userid; the store cannot, as a
// PostgreSQL database may serve several hosts.
func CheckHostUserid(username string, uid uint32) error {
	if err := checkUserid("user "+username, uid); err != nil {
		return err
	}
	if u, err := user.Lookup(username); err == nil {
		if u.Uid != strconv.FormatUint(uint64(uid), 10) {
			return errf(ErrInvalid, "user %s: --userid=%d: this host's user %s has uid %s", username, uid, username, u.Uid)
		}
		return nil
	}
	if other, ok := lookupUsername(uid); ok && other != username {
		return errf(ErrInvalid, "user %s: --userid=%d: uid %d is this host's user %s", username, uid, uid, other)
	}
	return nil
}

// errUseridTaken says uid is another user's in the database.
func errUseridTaken(username string, uid uint32, other string) error {
	return &Error{Kind: ErrExists, Msg: fmt.Sprintf("user %s: --userid=%d: uid %d is user %s's in the accounting database", username, uid, uid, other)}
}
