// Package jobingest is the job-ingest broker module: it accepts signed
// jobspecs from users (job-ingest.submit), validates them, assigns job
// ids (FLUIDs), records each job in the KVS with its submit event, and
// hands the jobs to the job manager. Submissions arriving together are
// recorded in one KVS commit and announced in one job-manager request.
package jobingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/internal/memo"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// Submit flags accepted from users (flux-core's FLUX_JOB_* flags).
const (
	flagDebug      = 0x02
	flagWaitable   = 0x04
	flagNoValidate = 0x08
	validFlags     = flagDebug | flagWaitable | flagNoValidate
)

// epochKey holds the instance's FLUID epoch so ids stay ordered and unique
// across restarts.
const epochKey = "job-ingest.epoch"

// Module is the job-ingest module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return "job-ingest" }

type pending struct {
	r       *flux.Request
	id      jobid.ID
	userid  uint32
	urgency int
	flags   int
	tSubmit float64
	J       []byte
	jobspec []byte
	spec    *jobspec.Jobspec // parsed, handed to the job manager
}

type ingest struct {
	h        *flux.Handle
	log      *slog.Logger
	owner    uint32
	gen      *jobid.Generator
	queue    []*pending
	inflight bool
	kicked   bool
	feasible bool // a scheduler answers feasibility.check
	// noValidate: loaded with disable-validator (flux-core's option):
	// jobspecs are not checked against RFC 25 nor for feasibility here,
	// the scheduler refuses what it cannot run
	noValidate bool
	policy     *policy.Config
	acct       *accounting.Index // the accounting database (accounting.go)
	specs      *specCache
	// envelopes: J texts unwrapped lately (identical jobs carry the
	// same J when it is signed with the none mechanism)
	envelopes *memo.Cache[*sign.Envelope]
	hashName  string                // the content store's hash (blobrefs)
	stored    *memo.Cache[struct{}] // blobrefs stored lately (blobs.go)
	refs      *memo.Cache[string]   // blobrefs of texts hashed lately (blobs.go)
	// feasibleAt: when the scheduler last found each jobspec text
	// feasible (see feasibleFor)
	feasibleAt *memo.Cache[time.Time]
	// submitted counts accepted jobs, batches the KVS commits (stats).
	submitted, batches int
}

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	noValidate, err := parseArgs(args)
	if err != nil {
		return err
	}
	ownerStr, err := h.Attr(ctx, "security.owner")
	if err != nil {
		return err
	}
	owner, _ := strconv.ParseUint(ownerStr, 10, 32)
	hashName, err := content.HashName(ctx, h)
	if err != nil {
		return err
	}
	in := &ingest{h: h, log: flux.NewLogger(h, "job-ingest"), owner: uint32(owner), feasible: true,
		specs: newSpecCache(), envelopes: memo.New[*sign.Envelope](specCacheSize), hashName: hashName, stored: memo.New[struct{}](storedRefsMax),
		refs: memo.New[string](specCacheSize), feasibleAt: memo.New[time.Time](specCacheSize)}
	in.noValidate = noValidate
	in.feasible = !noValidate
	if err := in.initGenerator(ctx); err != nil {
		return err
	}
	if in.policy, err = policy.Fetch(ctx, h); err != nil {
		return err
	}
	for _, w := range in.policy.Warnings() {
		in.log.Warn(w)
	}
	h.HandleFunc("job-ingest.submit", in.submit)
	h.HandleFunc("job-ingest.stats", func(r *flux.Request) {
		r.Respond(map[string]any{"submitted": in.submitted, "batches": in.batches, "queued": len(in.queue)})
	})
	h.HandleFunc("job-ingest.disconnect", func(*flux.Request) {})
	h.HandleFunc("job-ingest.config-reload", in.configReload)
	h.HandleFunc(accounting.IngestUpdateTopic, in.accountingUpdate)
	in.fetchAccounting(ctx)
	return h.Serve(ctx)
}

// parseArgs reads the module's arguments, flux-core's: disable-validator,
// and validator-plugins=, validator-args= and batch-count=, which fluxgo
// accepts and has no use for (its validation is built in, its batching
// timed).
func parseArgs(args []string) (noValidate bool, err error) {
	for _, a := range args {
		k, _, _ := strings.Cut(a, "=")
		switch {
		case a == "disable-validator":
			noValidate = true
		case k == "validator-plugins" || k == "validator-args" || k == "batch-count":
		default:
			return false, fmt.Errorf("job-ingest: unknown option %q (want disable-validator, validator-plugins=, validator-args= or batch-count=)", a)
		}
	}
	return noValidate, nil
}

// configReload takes a new instance configuration (flux config reload):
// queues and jobspec defaults apply to jobs submitted from now on.
func (in *ingest) configReload(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may reload the configuration")
		return
	}
	pol, err := policy.Parse(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	in.policy = pol
	for _, w := range pol.Warnings() {
		in.log.Warn(w)
	}
	in.feasibleAt = memo.New[time.Time](specCacheSize) // queues may require other nodes now
	r.Respond(nil)
}

// initGenerator sets up FLUID generation with the instance's epoch (kept
// in the KVS so ids stay ordered across restarts) and past the largest id
// the job manager knows.
func (in *ingest) initGenerator(ctx context.Context) error {
	epoch := time.Now()
	var resp struct {
		Val struct {
			Data []byte `json:"data"`
		} `json:"val"`
	}
	err := in.h.Call(ctx, "kvs.lookup", flux.NodeidAny, map[string]any{"key": epochKey, "namespace": "primary", "flags": 0}, &resp)
	switch {
	case err == nil:
		ms, perr := strconv.ParseInt(string(resp.Val.Data), 10, 64)
		if perr != nil {
			return fmt.Errorf("%s=%q: %v", epochKey, resp.Val.Data, perr)
		}
		epoch = time.UnixMilli(ms)
	case errors.Is(err, syscall.ENOENT):
		var txn kvs.Txn
		txn.Put(epochKey, []byte(strconv.FormatInt(epoch.UnixMilli(), 10)))
		if _, err := kvs.Commit(ctx, in.h, "", 0, &txn); err != nil {
			return fmt.Errorf("recording FLUID epoch: %w", err)
		}
	default:
		return fmt.Errorf("reading FLUID epoch: %w", err)
	}
	gen, err := jobid.NewGenerator(0, epoch)
	if err != nil {
		return err
	}
	var info struct {
		MaxJobID jobid.ID `json:"max_jobid"`
	}
	if err := in.h.Call(ctx, "job-manager.getinfo", flux.NodeidAny, nil, &info); err == nil {
		gen.AdvancePast(info.MaxJobID)
	}
	in.gen = gen
	return nil
}

// feasibleFor is how long job-ingest takes the scheduler's word that a
// jobspec text is feasible without asking again. The jobs of a burst
// (flux submit --cc, an array, bulksubmit) share their jobspec text, and
// feasibility depends only on it and the instance's resources and
// queues: a job submitted this soon after those changed may be accepted
// and then refused by the scheduler at alloc (an exception) instead of
// refused at submission. A configuration reload forgets every answer.
const feasibleFor = time.Second

func (in *ingest) submit(r *flux.Request) {
	req, err := decodeSubmit(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EPROTO, "job-ingest.submit: %v", err)
		return
	}
	// J holds the jobspec base64-encoded (4/3 of its size) with a short
	// header: refuse a huge one before decoding it
	limit := in.policy.MaxJobspecSize
	if int64(len(req.J)) > limit/3*4+4096 {
		r.Errorf(syscall.EINVAL, "the jobspec (about %s) is larger than the limit of %s (ingest.max-jobspec-size)",
			size.Format(int64(len(req.J))/4*3), size.Format(limit))
		return
	}
	env, ok := in.envelopes.Lookup(req.J)
	if !ok {
		if env, err = sign.Unwrap(req.J); err != nil {
			r.Errorf(syscall.EINVAL, "%v", err)
			return
		}
		if int64(len(env.Payload)) > limit {
			r.Errorf(syscall.EINVAL, "the jobspec (%s) is larger than the limit of %s (ingest.max-jobspec-size)",
				size.Format(int64(len(env.Payload))), size.Format(limit))
			return
		}
		in.envelopes.Put(req.J, env)
	}
	if env.Userid != r.Userid() {
		r.Errorf(syscall.EPERM, "signer userid %d does not match requestor userid %d", env.Userid, r.Userid())
		return
	}
	urgency := 16
	if req.Urgency != nil {
		urgency = *req.Urgency
	}
	if urgency < 0 || urgency > 31 {
		r.Errorf(syscall.EINVAL, "urgency %d is out of range 0-31", urgency)
		return
	}
	if req.Flags&^validFlags != 0 {
		r.Errorf(syscall.EINVAL, "invalid submit flags 0x%x", req.Flags)
		return
	}
	if req.Flags&flagNoValidate != 0 && !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner can submit with FLUX_JOB_NOVALIDATE")
		return
	}
	spec, err := in.specs.check(env.Payload, in.noValidate || req.Flags&flagNoValidate != 0)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	text := env.Payload
	d := in.defaultsFor(spec)
	if err := in.charge(r, spec, &d); err != nil {
		r.RespondError(err)
		return
	}
	if d != (defaults{}) {
		if text, spec, err = in.specs.withDefaults(text, d); err != nil {
			r.Errorf(syscall.EINVAL, "%v", err)
			return
		}
	}
	if urgency > 16 && !r.IsOwner() {
		bank, _ := spec.Attribute("system.bank")
		b, _ := bank.(string)
		if !in.expedite(r.Userid(), b) {
			r.Errorf(syscall.EINVAL, "only the instance owner may submit with urgency above 16")
			return
		}
	}
	if err := in.policy.CheckQueue(spec.Queue()); err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	if !r.IsOwner() {
		if err := in.policy.CheckAccess(spec.Queue(), r.Userid()); err != nil {
			r.RespondError(err)
			return
		}
	}
	if v, ok := spec.Attribute("system.reservation"); ok {
		name, isString := v.(string)
		if !isString {
			r.Errorf(syscall.EINVAL, "attributes.system.reservation must be a reservation name, not %v", v)
			return
		}
		if err := in.policy.CheckReservation(name, r.Userid(), r.IsOwner(), float64(time.Now().Unix())); err != nil {
			r.Errorf(syscall.EINVAL, "%v", err)
			return
		}
	}
	p := &pending{r: r, userid: r.Userid(), urgency: urgency, flags: req.Flags, J: req.Jraw, jobspec: text, spec: spec}
	if !in.feasible {
		in.enqueue(p)
		return
	}
	if t, ok := in.feasibleAt.LookupBytes(text); ok && time.Since(t) < feasibleFor {
		in.enqueue(p) // the same jobspec was found feasible a moment ago
		return
	}
	fb := make([]byte, 0, len(text)+16)
	fb = append(append(append(fb, `{"jobspec":`...), text...), '}')
	f, err := in.h.RPC("feasibility.check", flux.NodeidAny, flux.JSONBuffer(fb), 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		switch {
		case err == nil:
			in.feasibleAt.Put(string(text), time.Now())
		case errors.Is(err, syscall.ENOSYS):
			in.feasible = false // no scheduler loaded that checks; stop asking
		default:
			r.RespondError(err)
			return
		}
		in.enqueue(p)
	})
}

// defaultsFor returns what the configuration fills in a jobspec: the
// default queue if it names none, the time limit of its queue if it sets
// none.
func (in *ingest) defaultsFor(spec *jobspec.Jobspec) defaults {
	var d defaults
	queue := spec.Queue()
	if queue == "" {
		d.queue, queue = in.policy.DefaultQueue, in.policy.DefaultQueue
	}
	if dur, err := spec.Duration(); err == nil && dur == 0 {
		d.duration = in.policy.DefaultDurationOf(queue)
	}
	return d
}

func (in *ingest) enqueue(p *pending) {
	id, err := in.gen.Next()
	if err != nil {
		p.r.RespondError(err)
		return
	}
	p.id = id
	p.tSubmit = float64(time.Now().UnixNano()) / 1e9
	in.queue = append(in.queue, p)
	in.kick()
}

// kick flushes queued jobs after the current batch of requests, unless a
// flush is already in flight (then they go with the next one).
func (in *ingest) kick() {
	if in.kicked || in.inflight {
		return
	}
	in.kicked = true
	in.h.Post(in.flush)
}

// flush stores the queued jobs' J and jobspec blobs, hands the jobs to
// the job manager (which records them in the KVS), then answers the
// submitters.
func (in *ingest) flush() {
	in.kicked = false
	if in.inflight || len(in.queue) == 0 {
		return
	}
	batch := in.queue
	in.queue = nil
	in.inflight = true
	in.batches++
	in.storeBlobs(batch, func(refs []jobRefs, err error) {
		if err != nil {
			in.log.Error("storing submitted jobspecs failed", "err", err, "jobs", len(batch))
			for _, p := range batch {
				p.r.RespondError(fmt.Errorf("recording job in the content store: %w", err))
			}
			in.done()
			return
		}
		in.handOver(batch, refs)
	})
}

// handOver gives a batch of jobs to the job manager, which records them
// in the KVS (J and jobspec by the refs of their stored blobs, and the
// eventlog) together with their first events, and answers once they are
// committed.
func (in *ingest) handOver(batch []*pending, refs []jobRefs) {
	// job-manager.submit {"jobs":[{"id","userid","urgency","t_submit",
	// "flags","record"}]}, the jobspecs attached (wire.SubmitAttachment)
	jobs := make([]wire.SubmitJob, len(batch))
	att := &wire.SubmitAttachment{Specs: make([]*jobspec.Jobspec, len(batch)), Raw: make([][]byte, len(batch))}
	records := make([]wire.SubmitRecord, len(batch))
	for i, p := range batch {
		records[i] = wire.SubmitRecord{J: refs[i].J, Jobspec: refs[i].jobspec}
		jobs[i] = wire.SubmitJob{ID: p.id, Userid: p.userid, Urgency: p.urgency, TSubmit: p.tSubmit, Flags: p.flags, Record: &records[i]}
		att.Specs[i], att.Raw[i] = p.spec, p.jobspec
		p.spec = nil
	}
	jm := wire.AppendSubmitRequest(make([]byte, 0, 16+128*len(batch)), jobs)
	fail := func(err error) {
		for _, p := range batch {
			p.r.RespondError(err)
		}
		in.done()
	}
	req := message.NewRequest("job-manager.submit", flux.NodeidAny, nil)
	req.SetJSONBuffer(jm)
	req.Attached = att
	f, err := in.h.SendRequest(req, 0)
	if err != nil {
		fail(fmt.Errorf("job manager: %w", err))
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if err != nil {
			// nothing of the batch is recorded; jobs the job manager
			// took in before a failed commit it has ended itself
			in.log.Error("job manager did not take jobs", "err", err, "jobs", len(batch))
			fail(fmt.Errorf("job manager: %w", err))
			return
		}
		rejected, rootseq, err := wire.DecodeSubmitResponse(m.JSON())
		if err == nil && rootseq < 0 {
			err = errors.New("no rootseq: the job manager did not record the jobs")
		}
		if err != nil {
			in.log.Error("bad job-manager.submit response", "err", err)
			fail(fmt.Errorf("job manager: %w", err))
			return
		}
		for _, p := range batch {
			if msg, bad := rejected[p.id]; bad {
				p.r.Errorf(syscall.EINVAL, "%s", msg)
			}
		}
		in.done()
		in.acknowledge(batch, rejected, rootseq)
	})
}

// acknowledge gives the submitters of batch (but the rejected) their
// job IDs once a KVS checkpoint names the root that recorded the jobs
// (rootseq or later): a job whose ID was given out survives a crash of
// the broker. The job manager has the jobs already; the next batches
// do not wait for this one's checkpoint, and one checkpoint serves all
// the batches that wait for it.
func (in *ingest) acknowledge(batch []*pending, rejected map[jobid.ID]string, rootseq int64) {
	answer := func(err error) {
		for _, p := range batch {
			if _, bad := rejected[p.id]; bad {
				continue
			}
			if err != nil {
				// The job manager has it: end it with an exception
				// rather than let a job the submitter was refused run.
				in.h.RPC("job-manager.raise", flux.NodeidAny, map[string]any{"id": p.id, "type": "ingest",
					"severity": 0, "note": err.Error()}, flux.NoResponse)
				p.r.RespondError(err)
				continue
			}
			in.submitted++
			p.r.Respond(flux.JSONBuffer(idResponse(p.id)))
		}
	}
	f, err := in.h.RPC("kvs.checkpoint", 0, map[string]int64{"rootseq": rootseq}, 0)
	if err == nil {
		f.Then(func(_ *flux.Message, err error) {
			if err != nil {
				in.log.Error("checkpointing accepted jobs failed", "err", err, "jobs", len(batch))
				err = fmt.Errorf("making the job durable: %w", err)
			}
			answer(err)
		})
		return
	}
	answer(fmt.Errorf("making the job durable: %w", err))
}

func (in *ingest) done() {
	in.inflight = false
	in.kick()
}
