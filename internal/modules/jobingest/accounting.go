package jobingest

import (
	"context"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Accounting at submission (issue 25): once the accounting database has
// users, a job is charged to a bank and project of its user's (the ones
// it names, or the user's defaults, written into its jobspec so that
// flux jobs, the limits and the archive all see them), and a job naming
// a bank or project that is not the user's is refused. The accounting
// module sends the database (accounting.IngestUpdateTopic) after each
// change; ingest asks for it when it starts, in case it was reloaded.

// accountingUpdate takes the accounting module's snapshot.
func (in *ingest) accountingUpdate(r *flux.Request) {
	if !r.RequireOwner() {
		return
	}
	var snap accounting.Snapshot
	if r.Decode(&snap) != nil {
		return
	}
	in.acct = accounting.NewIndex(snap)
	r.Respond(nil)
}

// fetchAccounting asks the accounting module for the database; an
// instance without one (ENOSYS: the module loads after ingest at start,
// and pushes then) leaves the index empty.
func (in *ingest) fetchAccounting(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var snap accounting.Snapshot
	if err := in.h.Call(ctx, accounting.Service+".snapshot", flux.NodeidAny, nil, &snap); err != nil {
		if flux.ErrnoOf(err) != syscall.ENOSYS {
			in.log.Warn("fetching the accounting database", "err", err)
		}
		return
	}
	in.acct = accounting.NewIndex(snap)
}

// charge fills d with the bank and project the job is charged to, or
// says why the user may not charge the ones it names.
func (in *ingest) charge(r *flux.Request, spec *jobspec.Jobspec, d *defaults) error {
	if !in.acct.Enforcing() {
		return nil
	}
	bank, _ := spec.Attribute("system.bank")
	b, _ := bank.(string)
	project, _ := spec.Attribute("system.project")
	p, _ := project.(string)
	cb, cp, err := in.acct.Charge(r.Userid(), r.IsOwner(), b, p)
	if err != nil {
		return err
	}
	if cb != b {
		d.bank = cb
	}
	if cp != p {
		d.project = cp
	}
	return nil
}

// expedite reports whether the job's association may submit with
// urgency above 16: the configuration's privilege, or the database's.
func (in *ingest) expedite(uid uint32, bank string) bool {
	if _, ok := in.policy.Privileges(uid, bank); ok {
		return true
	}
	a, ok := in.acct.Association(uid, bank)
	return ok && a.Active && a.Expedite
}
