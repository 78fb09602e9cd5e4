package accounting

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		says string
	}{
		{"physics", true, ""},
		{"ünïcødé-банк", true, ""},
		{strings.Repeat("x", MaxNameLen), true, ""},
		{"", false, "empty"},
		{strings.Repeat("x", MaxNameLen+1), false, "256 bytes: at most 255"},
		{strings.Repeat("x", 5000), false, "5000 bytes"},
		{"bad\xffname", false, "not valid UTF-8"},
		{"bad\ufffdname", false, "U+FFFD"},
		{"bell\a", false, "printable"},
		{"a b", false, "spaces"},
		{"a:b", false, "':'"},
		{"a,b", false, "','"},
	} {
		err := checkName("bank", c.name)
		if c.ok != (err == nil) || (err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says))) {
			t.Errorf("checkName(%.40q) = %v, want ok=%v saying %q", c.name, err, c.ok, c.says)
		}
	}
}

// Host users: a name the host knows must have its uid, and a uid the
// host knows must be that user's name.
func TestCheckHostUserid(t *testing.T) {
	const stranger = "fluxgo-no-such-user-25"
	if _, err := LookupUserid(stranger); err == nil {
		t.Skipf("this host has a user %s", stranger)
	}
	for _, c := range []struct {
		name string
		uid  uint32
		says string // "": accepted
	}{
		{"root", 0, ""},
		{"root", 4242, "this host's user root has uid 0"},
		{stranger, 0, "uid 0 is this host's user root"},
		{stranger, math.MaxUint32, "want a uid from 0 to 4294967294"},
	} {
		err := CheckHostUserid(c.name, c.uid)
		if (c.says == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.says)) {
			t.Errorf("CheckHostUserid(%s, %d) = %v, want %q", c.name, c.uid, err, c.says)
		}
	}
	// a uid the host does not know, for a name it does not know: a
	// user of another cluster of a shared database
	for uid := uint32(3_999_000); uid < 3_999_100; uid++ {
		if _, known := lookupUsername(uid); !known {
			if err := CheckHostUserid(stranger, uid); err != nil {
				t.Errorf("CheckHostUserid(%s, %d): %v", stranger, uid, err)
			}
			break
		}
	}
}

// Shares that an old database may hold above MaxShares do not wrap the
// sums: two sibling banks of math.MaxInt64 shares each get half.
func TestFairShareHugeShares(t *testing.T) {
	banks := []Bank{{Name: "root", Shares: 1, Active: true},
		{Name: "a", Parent: "root", Shares: math.MaxInt64, Active: true},
		{Name: "b", Parent: "root", Shares: math.MaxInt64, Active: true}}
	assocs := []Association{{Userid: 1, Bank: "a", Shares: math.MaxInt64, Active: true},
		{Userid: 2, Bank: "a", Shares: math.MaxInt64, Active: true},
		{Userid: 3, Bank: "b", Shares: 1, Active: true}}
	f := FairShare(banks, assocs, map[AssocKey]float64{{1, "a"}: 1, {2, "a"}: 1, {3, "b"}: 2})
	// u1 and u2: S = 1/2 × 1/2, U = 1/4: 2^-1; u3: S = 1/2, U = 1/2: 2^-1
	for k, want := range map[AssocKey]float64{{1, "a"}: 0.5, {2, "a"}: 0.5, {3, "b"}: 0.5} {
		if got := f[k]; math.Abs(got-want) > 1e-9 {
			t.Errorf("factor of %+v = %v, want %v", k, got, want)
		}
	}
}
