package policy

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Association privileges (seed 003: "give specified user+banks the
// ability to submit jobs that ... exceed limits or have expedite
// priority"). The [accounting] table that sets per-association limits
// (the .accounting-limits jobtap plugin) may also grant, at any of its
// levels (the table itself, banks.NAME, users.USER, users."USER:BANK"):
//
//	exempt = true    # the association's jobs pass every limit
//	expedite = true  # it may submit with urgency above 16 (up to 31)

type privileges struct {
	Exempt   *bool `json:"exempt"`
	Expedite *bool `json:"expedite"`
}

type acctPrivileges struct {
	def   privileges
	banks map[string]privileges
	users map[string]privileges // "UID" or "UID:BANK"
}

// parseAccounting reads the privileges of the [accounting] table (its
// limits are the jobtap plugin's to check).
func parseAccounting(raw json.RawMessage) (acctPrivileges, error) {
	var p acctPrivileges
	var t struct {
		privileges
		Banks map[string]privileges `json:"banks"`
		Users map[string]privileges `json:"users"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return p, invalid("accounting: %v", err)
	}
	p.def, p.banks, p.users = t.privileges, t.Banks, map[string]privileges{}
	for name, v := range t.Users {
		u, bank, hasBank := strings.Cut(name, ":")
		uid, err := LookupUID(u)
		if err != nil {
			return p, invalid("accounting.users.%s: %v", name, err)
		}
		key := strconv.FormatUint(uint64(uid), 10)
		if hasBank {
			key += ":" + bank
		}
		p.users[key] = v
	}
	return p, nil
}

// Privileges returns the association's exempt and expedite privileges.
func (c *Config) Privileges(uid uint32, bank string) (exempt, expedite bool) {
	p := c.accounting
	if p.def == (privileges{}) && len(p.banks) == 0 && len(p.users) == 0 {
		return false, false // none granted: nothing to format or look up per job
	}
	u := strconv.FormatUint(uint64(uid), 10)
	for _, l := range []privileges{p.def, p.banks[bank], p.users[u], p.users[u+":"+bank]} {
		if l.Exempt != nil {
			exempt = *l.Exempt
		}
		if l.Expedite != nil {
			expedite = *l.Expedite
		}
	}
	return exempt, expedite
}
