package jobarchive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/archivedb"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// queryChunk is how many records one job-archive.query response holds.
const queryChunk = 1000

var errQueryCanceled = errors.New("query canceled")

func (a *archiver) query(ctx context.Context, r *flux.Request) {
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EPROTO, "job-archive.query is a streaming RPC: set the streaming flag")
		return
	}
	var q archivedb.QueryRequest
	if err := r.Decode(&q); err != nil {
		return
	}
	for _, v := range []struct {
		name string
		t    float64
	}{{"since", q.Since}, {"until", q.Until}} {
		if math.IsNaN(v.t) || math.IsInf(v.t, 0) || v.t < 0 {
			r.Errorf(syscall.EINVAL, "job-archive.query: %s=%v: want a time in seconds since the epoch", v.name, v.t)
			return
		}
	}
	if q.Cluster && q.Inactive {
		r.Errorf(syscall.EINVAL, "job-archive.query: cluster and inactive do not go together")
		return
	}
	f := archivedb.Filter{Since: q.Since, Until: q.Until, Inactive: q.Inactive}
	if !r.IsOperator() {
		if q.Cluster {
			r.Errorf(syscall.EPERM, "a report of the whole cluster's node time is for the instance owner and operators")
			return
		}
		uid := r.Userid()
		f.Userid = &uid
	}
	if q.Cluster {
		// the instance's resource eventlog and R, which the report
		// replays: operators may not read the primary namespace
		first := archivedb.QueryResponse{Records: []archivedb.Record{}}
		ev, err := kvs.GetRaw(ctx, a.h, "", "resource.eventlog")
		if err != nil {
			r.Errorf(syscall.EIO, "job-archive.query: resource.eventlog: %s", flux.ErrorText(err))
			return
		}
		var R json.RawMessage
		if err := kvs.GetJSON(ctx, a.h, "", "resource.R", &R); err != nil {
			r.Errorf(syscall.EIO, "job-archive.query: resource.R: %s", flux.ErrorText(err))
			return
		}
		first.ResourceEventlog, first.R = string(ev), R
		if err := r.Respond(first); err != nil {
			return
		}
	}
	chunk := make([]archivedb.Record, 0, queryChunk)
	flush := func() error {
		if err := r.Respond(archivedb.QueryResponse{Records: chunk}); err != nil {
			return errQueryCanceled
		}
		chunk = chunk[:0]
		return nil
	}
	err := archivedb.Query(ctx, a.db, f, func(rec archivedb.Record) error {
		chunk = append(chunk, rec)
		if len(chunk) == queryChunk {
			return flush()
		}
		return nil
	})
	if errors.Is(err, errQueryCanceled) {
		return
	}
	if err == nil && len(chunk) > 0 {
		err = flush()
	}
	if err != nil {
		r.Errorf(syscall.EIO, "%v", fmt.Errorf("job archive %s: %w", a.cfg.DBPath, err))
		return
	}
	r.EndStream()
}
