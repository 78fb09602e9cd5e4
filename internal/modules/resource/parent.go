package resource

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// methodJob is the RFC 44 resource-define method of an inventory taken
// from the enclosing instance's job.
const methodJob = "job"

// jobLookupTimeout bounds the look-up of the job's R in the enclosing
// instance.
const jobLookupTimeout = 30 * time.Second

// jobR returns the inventory of a nested instance: the R of the job it
// runs as (job-info.lookup in the enclosing instance), with its ranks
// renumbered 0, 1, 2 ... in ascending order (as it was when the job
// started: see fetchJobR). That numbering is the
// nested instance's: its brokers are the job's tasks, one per node of
// R, and the job shell gives task ranks (which PMI boot turns into broker
// ranks) in ascending order of the job's ranks. The expiration carries
// over, so the nested instance knows when its allocation ends.
//
// It returns nil, after logging why, when R cannot be had or does not
// fit the instance (a job running more than one broker per node, say);
// the caller then discovers resources instead.
func (inv *inventory) jobR(ctx context.Context) *rset.R {
	R, err := fetchJobR(ctx, inv.cfg.ParentURI, inv.cfg.JobID)
	if err != nil {
		inv.log.Warn(fmt.Sprintf("cannot take the inventory from job %s of the enclosing instance (%v); discovering resources instead",
			inv.cfg.JobID, err))
		return nil
	}
	if n := R.NNodes(); n != int(inv.size) {
		inv.log.Warn(fmt.Sprintf("job %s has %d nodes but this instance has %d brokers; discovering resources instead",
			inv.cfg.JobID, n, inv.size))
		return nil
	}
	return R.Remap()
}

// fetchJobR returns job id's original R at uri: its R less the changes
// its eventlog records since it started (nest.go), so that a job that
// grew or shrank still gives this instance's ranks 0..n-1.
func fetchJobR(ctx context.Context, uri, id string) (*rset.R, error) {
	jid, err := jobid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("jobid %q: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, jobLookupTimeout)
	defer cancel()
	h, err := flux.Open(uri)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	R, events, err := lookupJob(ctx, h, jid)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", uri, err)
	}
	changes, err := jobChanges(events)
	if err != nil {
		return nil, fmt.Errorf("job eventlog: %w", err)
	}
	return originalR(R, changes), nil
}
