package broker

// admin.eventlog (flux-startlog(1)): rank 0 posts a "start" event once
// rc1 has loaded the modules and a "finish" event as it shuts down, so
// each run of the instance on its state directory leaves its start and
// stop times. A start not preceded by a finish means the previous run
// ended without its shutdown sequence (a crash, kill -9): rank 0 says
// so in its log, as flux-core's rc1 does.

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/version"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// AdminEventlog is the KVS key of the instance's start/stop log.
const AdminEventlog = "admin.eventlog"

const startlogTimeout = 10 * time.Second

// postStart appends the start event, first checking that the previous
// run finished.
func (b *Broker) postStart() {
	if b.rank != 0 || !b.cfg.Startlog || !b.modules.isLoaded("kvs") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), startlogTimeout)
	defer cancel()
	h := b.svc.h
	raw, err := kvs.GetRaw(ctx, h, "", AdminEventlog)
	switch {
	case errors.Is(err, syscall.ENOENT):
	case err != nil:
		b.log.Warn("admin.eventlog: " + err.Error())
	default:
		if evs, err := eventlog.Parse(raw); err == nil && len(evs) > 0 && evs[len(evs)-1].Name != "finish" {
			b.log.Warn("the instance's previous run ended without its shutdown (a crash?): " +
				"jobs and KVS changes of its last moments may have been lost (see flux startlog)")
		}
	}
	b.appendAdminEvent(ctx, "start", map[string]string{"version": version.Version})
}

// postFinish appends the finish event (rank 0, at shutdown, while the
// KVS is still loaded).
func (b *Broker) postFinish() {
	if b.rank != 0 || !b.cfg.Startlog || !b.modules.isLoaded("kvs") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), startlogTimeout)
	defer cancel()
	b.appendAdminEvent(ctx, "finish", nil)
}

func (b *Broker) appendAdminEvent(ctx context.Context, name string, data any) {
	ev, err := eventlog.New(name, data)
	if err == nil {
		var line []byte
		if line, err = eventlog.Encode(ev); err == nil {
			var txn kvs.Txn
			txn.Append(AdminEventlog, line)
			var res kvs.CommitResult
			if res, err = kvs.Commit(ctx, b.svc.h, "", 0, &txn); err == nil {
				// durable at once: a crash soon after must still find it
				err = b.svc.h.Call(ctx, "kvs.checkpoint", 0, map[string]int64{"rootseq": res.Rootseq}, nil)
			}
		}
	}
	if err != nil {
		b.log.Warn("admin.eventlog " + name + ": " + err.Error())
	}
}
