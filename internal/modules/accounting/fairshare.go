package accounting

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// Fair-share (issue 25): every interval, and after every change of the
// database, the module reads the job archive's usage (job-archive.query:
// the jobs that ran in the last 10 half-lives), charges each job's
// core-hours to its association decayed by the time since it ended,
// computes every association's fair-share (acct.FairShare) and sends it
// to the job manager's mf-priority plugin (acct.PriorityUpdateTopic),
// which reprioritizes the pending jobs. flux account update-usage runs a
// pass now.

// FairShareConfig is the [accounting.fairshare] table, read when the
// module starts.
type FairShareConfig struct {
	// DecayHalfLife: usage counts half after this long (FSD, default
	// "7d"; "0" for no decay).
	DecayHalfLife string `json:"decay-half-life"`
	// Interval between passes (FSD, default "1m").
	Interval string `json:"interval"`
	// Algorithm: "classic" (the default: acct.FairShare) or "fair-tree"
	// (Slurm's Fair Tree: acct.FairTree).
	Algorithm string `json:"algorithm"`

	halfLife, interval time.Duration
}

// The fair-share algorithms.
const (
	AlgorithmClassic  = "classic"
	AlgorithmFairTree = "fair-tree"
)

// factors computes the fair-share factors with the configured
// algorithm.
func (c *FairShareConfig) factors(banks []acct.Bank, assocs []acct.Association, usage map[acct.AssocKey]float64) map[acct.AssocKey]float64 {
	if c.Algorithm == AlgorithmFairTree {
		return acct.FairTree(banks, assocs, usage)
	}
	return acct.FairShare(banks, assocs, usage)
}

// DefaultFairShareInterval is the time between passes.
const DefaultFairShareInterval = time.Minute

// Validate parses the durations, filling in the defaults.
func (c *FairShareConfig) Validate() error {
	c.halfLife, c.interval = acct.DefaultHalfLife, DefaultFairShareInterval
	switch c.Algorithm {
	case "", AlgorithmClassic, AlgorithmFairTree:
	default:
		return fmt.Errorf("[accounting.fairshare] algorithm=%q: want %q or %q", c.Algorithm, AlgorithmClassic, AlgorithmFairTree)
	}
	if c.DecayHalfLife != "" {
		d, err := fsd.ParseDuration(c.DecayHalfLife)
		if err != nil || d < 0 {
			return fmt.Errorf("[accounting.fairshare] decay-half-life=%q: want a duration such as \"7d\" (0: no decay)", c.DecayHalfLife)
		}
		c.halfLife = d
	}
	if c.Interval != "" {
		d, err := fsd.ParseDuration(c.Interval)
		if err != nil || d < time.Second {
			return fmt.Errorf("[accounting.fairshare] interval=%q: want a duration of 1s or more such as \"1m\"", c.Interval)
		}
		c.interval = d
	}
	return nil
}

// parseFairShareConfig reads [accounting.fairshare] from the instance
// configuration (as config.get returns it).
func parseFairShareConfig(raw json.RawMessage) (FairShareConfig, error) {
	var top struct {
		Accounting struct {
			FairShare json.RawMessage `json:"fairshare"`
		} `json:"accounting"`
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &top); err != nil {
			return FairShareConfig{}, fmt.Errorf("[accounting.fairshare]: %v", err)
		}
	}
	var c FairShareConfig
	if len(top.Accounting.FairShare) > 0 {
		dec := json.NewDecoder(bytes.NewReader(top.Accounting.FairShare))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return FairShareConfig{}, fmt.Errorf("[accounting.fairshare]: %v (keys: decay-half-life, interval, algorithm)", err)
		}
	}
	return c, c.Validate()
}

// chargeJob is a job's decayed core-hours at now: its last run's and
// those of the runs a requeue on preemption ended (what they used counts
// as much as a run that completed).
func chargeJob(r *archivedb.Record, now float64, halfLife time.Duration) float64 {
	end := r.TCleanup
	if end <= 0 {
		end = r.TInactive
	}
	total := chargeRun(r.Ncores, r.TRun, end, now, halfLife)
	for _, run := range r.RequeuedRuns {
		total += chargeRun(run.Ncores, run.TRun, run.TEnd, now, halfLife)
	}
	return total
}

// chargeRun is the decayed core-hours at now of ncores from start to end.
func chargeRun(ncores int, start, end, now float64, halfLife time.Duration) float64 {
	if start <= 0 || end <= start || ncores <= 0 {
		return 0
	}
	coreHours := float64(ncores) * (end - start) / 3600
	return acct.Decayed(coreHours, time.Duration((now-end)*float64(time.Second)), halfLife)
}

// archiveUsage sums the decayed core-hours of the jobs that ran in the
// last 10 half-lives, per association (a job archived without a bank is
// charged to its user's default bank), and adds them up per day into
// days (history.go), when it is not nil.
func (s *server) archiveUsage(ctx context.Context, now float64, defaultBank, names map[uint32]string, days func(since float64) *dayUsage) (map[acct.AssocKey]float64, *dayUsage, error) {
	since := 0.0
	if s.fs.halfLife > 0 {
		since = now - 10*s.fs.halfLife.Seconds()
	}
	var hist *dayUsage
	if days != nil {
		hist = days(since)
	}
	usage := map[acct.AssocKey]float64{}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.h.Call(cctx, "job-archive.sync", flux.NodeidAny, nil, nil); err != nil {
		if errors.Is(err, syscall.ENOSYS) {
			return usage, nil, nil // no archive: nobody has used anything
		}
		return nil, nil, fmt.Errorf("job-archive.sync: %s", flux.ErrorText(err))
	}
	q := archivedb.QueryRequest{Since: since, Until: now + 1}
	err := s.h.Stream(cctx, "job-archive.query", flux.NodeidAny, q, func(m *flux.Message) error {
		var resp archivedb.QueryResponse
		if err := m.UnmarshalPayload(&resp); err != nil {
			return err
		}
		for i := range resp.Records {
			r := &resp.Records[i]
			bank := r.Bank
			if bank == "" {
				bank = defaultBank[r.Userid]
			}
			usage[acct.AssocKey{Userid: r.Userid, Bank: bank}] += chargeJob(r, now, s.fs.halfLife)
			if hist != nil {
				name := names[r.Userid]
				if name == "" {
					name = r.Username
				}
				end := r.TCleanup
				if end <= 0 {
					end = r.TInactive
				}
				hist.add(name, bank, r.Ncores, r.TRun, end, r.TInactive)
				for _, run := range r.RequeuedRuns {
					hist.addTime(name, bank, run.Ncores, run.TRun, run.TEnd, r.TInactive)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("job-archive.query: %s", flux.ErrorText(err))
	}
	return usage, hist, nil
}

// updateFairShare runs one pass and sends its result to the priority
// plugin (skipped when it is not loaded).
func (s *server) updateFairShare(ctx context.Context) (acct.FairShareUpdate, error) {
	upd := acct.FairShareUpdate{Time: float64(time.Now().UnixNano()) / 1e9, HalfLife: s.fs.halfLife.Seconds(),
		Entries: []acct.FairShareEntry{}}
	if s.store == nil {
		return upd, nil
	}
	banks, err := s.store.Banks(ctx)
	if err != nil {
		return upd, err
	}
	assocs, err := s.store.Associations(ctx, "")
	if err != nil {
		return upd, err
	}
	defaults, names := map[uint32]string{}, map[uint32]string{}
	for _, a := range assocs {
		defaults[a.Userid], names[a.Userid] = a.DefaultBank, a.Username
	}
	var days func(float64) *dayUsage
	if us, ok := s.store.(acct.UsageStore); ok {
		if s.usageMark == 0 {
			// the module's first pass: the jobs that ended before the
			// newest day written were seen by the pass that wrote it
			last, err := us.LastUsagePeriod(ctx)
			if err != nil {
				return upd, err
			}
			s.usageMark = float64(last)
		}
		days = func(since float64) *dayUsage { return newDayUsage(time.Local, since, s.usageMark) }
	}
	usage, hist, err := s.archiveUsage(ctx, upd.Time, defaults, names, days)
	if err != nil {
		return upd, err
	}
	if hist != nil {
		if err := s.store.(acct.UsageStore).SetUsage(ctx, hist.periods()); err != nil {
			return upd, fmt.Errorf("usage history: %w", err)
		}
		s.usageMark = max(s.usageMark, hist.maxInactive)
	}
	factors := s.fs.factors(banks, assocs, usage)
	fair := make(map[acct.AssocKey]acct.FairShareEntry, len(assocs))
	for _, a := range assocs {
		k := acct.AssocKey{Userid: a.Userid, Bank: a.Bank}
		if f, ok := factors[k]; ok {
			e := acct.FairShareEntry{Userid: a.Userid, Username: a.Username, Bank: a.Bank, Usage: usage[k], Factor: f}
			upd.Entries = append(upd.Entries, e)
			fair[k] = e
		}
	}
	s.fair = fair
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.h.Call(cctx, acct.PriorityUpdateTopic, flux.NodeidAny, upd, nil); err != nil && flux.ErrnoOf(err) != syscall.ENOSYS {
		return upd, fmt.Errorf("%s: %s", acct.PriorityUpdateTopic, flux.ErrorText(err))
	}
	return upd, nil
}

// fairShareLoop runs a pass every interval on the Serve goroutine
// until ctx ends or stop is called.
func (s *server) fairShareLoop(ctx context.Context) (stop func()) {
	var t *time.Timer
	t = time.AfterFunc(s.fs.interval, func() {
		s.h.Post(func() {
			if ctx.Err() != nil {
				return
			}
			if _, err := s.updateFairShare(ctx); err != nil {
				s.log.Warn("fair-share pass", "err", err)
			}
			t.Reset(s.fs.interval)
		})
	})
	return func() { t.Stop() }
}
