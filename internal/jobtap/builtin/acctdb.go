package builtin

import (
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/jobtap"
)

// The accounting database's part in .accounting-limits (issue 25): an
// association's own limits (flux account add-user/edit-user
// --max-running-jobs, --max-active-jobs, --max-nodes, --max-cores) come
// after every [accounting] key, so the configuration is the default the
// database refines; its exempt and expedite flags add to the
// configuration's. The accounting module sends the database to
// job-manager.accounting-limits.update after each change.

// Methods implements jobtap.Servicer.
func (a *AccountLimits) Methods() []jobtap.Method {
	return []jobtap.Method{{Topic: "accounting-limits.update", Handler: a.dbUpdate}}
}

func (a *AccountLimits) dbUpdate(payload json.RawMessage, _ uint32, owner bool) (any, error) {
	if !owner {
		return nil, fmt.Errorf("only the instance owner may send the accounting database: %w", syscall.EPERM)
	}
	var snap accounting.Snapshot
	if err := json.Unmarshal(payload, &snap); err != nil {
		return nil, fmt.Errorf("accounting-limits.update: %v: %w", err, syscall.EPROTO)
	}
	a.db = accounting.NewIndex(snap)
	for k := range a.assoc {
		a.release(k) // limits may have risen
	}
	return nil, nil
}

// dbLimits is the association's layer from the database (none: nothing
// set).
func (a *AccountLimits) dbLimits(k assocKey) acctLimits {
	as, ok := a.db.Association(k.uid, k.bank)
	if !ok {
		return acctLimits{}
	}
	return acctLimits{MaxActive: as.MaxActiveJobs, MaxRunning: as.MaxRunningJobs, MaxNodes: as.MaxNodes, MaxCores: as.MaxCores}
}

// Privileges implements jobtap.PrivilegeSource.
func (a *AccountLimits) Privileges(uid uint32, bank string) (exempt, expedite bool) {
	as, ok := a.db.Association(uid, bank)
	if !ok || !as.Active {
		return false, false
	}
	return as.Exempt, as.Expedite
}
