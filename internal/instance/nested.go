package instance

// A broker started as the task of a job (flux batch, flux alloc, or any
// job running "flux broker") is part of a nested instance. The job shell
// that started it put the enclosing instance's local URI in FLUX_URI and
// the job's id in FLUX_JOB_ID; the broker turns them into the attributes
// parent-uri, jobid and instance-level (the parent's level + 1), clears
// the job's variables so the initial program does not mistake them for
// its own (flux-environment(7), "initial program environment"), and, on
// rank 0 once the instance is up, posts the instance's URI to the
// enclosing job as a memo ({"uri": "ssh://HOST/RUNDIR/local"}, as
// flux-core does) so that flux proxy, flux jobs --recursive and flux
// pstree can find it. It also tells the enclosing job-exec which of its
// brokers the instance cannot lose (job-exec.critical-ranks), so that the
// loss of any other broker does not end the job.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// enclosing describes the instance a broker is nested in.
type enclosing struct {
	uri   string   // local URI of the enclosing instance's broker on this node
	id    jobid.ID // the job this instance runs as (0: not a job)
	level int      // this instance's instance-level
	// kvsNamespace is the job's KVS namespace in the enclosing instance
	kvsNamespace string
}

// jobEnvVars are cleared from a broker's environment so the initial
// program and rc scripts do not inherit the enclosing job's values.
var jobEnvVars = []string{
	"FLUX_JOB_ID", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES", "FLUX_JOB_TMPDIR",
	"FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", "FLUX_KVS_NAMESPACE",
	"FLUX_PROXY_REMOTE", "FLUX_PMI_LIBRARY_PATH", "I_MPI_PMI_LIBRARY",
}

// parentLevelTimeout bounds the look-up of the enclosing instance's
// instance-level.
const parentLevelTimeout = 10 * time.Second

// detectEnclosing reads the enclosing instance from the environment and
// clears the job's variables. It returns nil for a top-level instance.
// Call it after boot (PMI boot reads PMI_* first).
func detectEnclosing() *enclosing {
	uri := os.Getenv("FLUX_URI")
	idStr := os.Getenv("FLUX_JOB_ID")
	ns := os.Getenv("FLUX_KVS_NAMESPACE")
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PMI_") || strings.HasPrefix(name, "SLURM_") {
			os.Unsetenv(name)
		}
	}
	for _, name := range jobEnvVars {
		os.Unsetenv(name)
	}
	os.Unsetenv("FLUX_URI")
	if uri == "" {
		return nil
	}
	// A FLUX_URI nothing answers at is stale (left over in a shell),
	// not an enclosing instance.
	ctx, cancel := context.WithTimeout(context.Background(), parentLevelTimeout)
	defer cancel()
	h, err := flux.Open(uri)
	if err != nil {
		return nil
	}
	defer h.Close()
	v, err := h.Attr(ctx, "instance-level")
	if err != nil {
		return nil
	}
	enc := &enclosing{uri: uri, level: 1, kvsNamespace: ns}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		enc.level = n + 1
	}
	if idStr != "" {
		if id, err := jobid.Parse(idStr); err == nil {
			enc.id = id
		}
	}
	return enc
}

// apply records the enclosing instance in the broker's attributes.
func (e *enclosing) apply(cfg *broker.Config) {
	if cfg.Attrs == nil {
		cfg.Attrs = make(map[string]string)
	}
	cfg.Attrs["parent-uri"] = e.uri
	cfg.Attrs["instance-level"] = strconv.Itoa(e.level)
	if e.id != 0 {
		cfg.Attrs["jobid"] = e.id.String()
		if e.kvsNamespace != "" {
			// the job's KVS namespace in the enclosing instance, when
			// its shell gave it one (fluxgo's shells do not make one
			// yet, so no name is invented)
			cfg.Attrs["parent-kvs-namespace"] = e.kvsNamespace
		}
	}
}

// announce runs on rank 0 of a nested instance that is a job: once every
// broker has joined, it tells the enclosing instance the instance's URI
// (a job memo) and its critical ranks. Failures are logged, not fatal:
// the instance works without them.
func (e *enclosing) announce(b *broker.Broker, cfg *broker.Config) {
	if e.id == 0 || b.Rank() != 0 {
		return
	}
	go func() {
		<-b.Running()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		self, err := flux.Open(b.LocalURI())
		if err != nil {
			return // the broker is already gone
		}
		defer self.Close()
		log := flux.NewLogger(self, "broker")
		h, err := flux.Open(e.uri)
		if err != nil {
			log.Error("cannot reach the enclosing instance", "uri", e.uri, "err", err)
			return
		}
		defer h.Close()
		host, _ := os.Hostname()
		if len(cfg.Hostlist) > 0 && cfg.Hostlist[0] != "" {
			host = cfg.Hostlist[0]
		}
		uri := "ssh://" + host + strings.TrimPrefix(b.LocalURI(), "local://")
		// critical ranks first: once the URI is out, the instance is in use
		crit := map[string]any{"id": e.id, "ranks": criticalRanks(cfg.Size, cfg.Fanout)}
		if err := h.Call(ctx, "job-exec.critical-ranks", flux.NodeidAny, crit, nil); err != nil {
			log.Warn("cannot set the critical ranks of the enclosing job", "id", e.id.String(), "err", err)
		}
		memo := map[string]any{"id": e.id, "volatile": false, "memo": map[string]any{"uri": uri}}
		if err := h.Call(ctx, "job-manager.memo", flux.NodeidAny, memo, nil); err != nil {
			log.Error("cannot post the instance URI to the enclosing job", "id", e.id.String(), "err", err)
		}
	}()
}

// criticalRanks is the idset of brokers an instance of size brokers
// cannot lose: rank 0 and every broker with children in the tree of
// fanout k (losing one cuts off its subtree). The brokers of a nested
// instance are the job's tasks in rank order, one per node, so these are
// also the job's critical shell ranks.
func criticalRanks(size, k uint32) string {
	if k == 0 {
		k = 2
	}
	if size == 0 {
		size = 1
	}
	// ranks 0 .. ceil((size-1)/k)-1 have children
	last := uint32(0)
	if size > 1 {
		last = (size - 2) / k
	}
	if last == 0 {
		return "0"
	}
	return "0-" + strconv.FormatUint(uint64(last), 10)
}
