// Package jobinfo is the job-info broker module (RFC 41): it reads job
// data from the KVS for users, enforcing that only a job's owner (or the
// instance owner) may read it. It serves job-info.lookup (keys of a
// job's KVS directory, optionally with eventlog updates applied to R and
// jobspec), job-info.eventlog-watch (a job's eventlog, guest exec
// eventlog or output eventlog as a stream of events, ended once the log
// is complete) with job-info.eventlog-watch-cancel, and
// job-info.update-lookup / job-info.update-watch for R and jobspec.
//
// Watches are built on kvs-watch.lookup with FLUX_KVS_WATCH and
// FLUX_KVS_WATCH_APPEND, so each response carries only new data.
package jobinfo

import (
	"context"
	"log/slog"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Name is the module and service name.
const Name = "job-info"

// Module is the job-info module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	s := &service{
		ctx:     ctx,
		h:       h,
		log:     flux.NewLogger(h, Name),
		watches: make(map[watchKey]*watch),
	}
	s.register()
	err := h.Serve(ctx)
	s.cancelAll()
	return err
}

// service holds the module's state; it is only touched on the Serve
// goroutine.
type service struct {
	ctx     context.Context
	h       *flux.Handle
	log     *slog.Logger
	watches map[watchKey]*watch
	updates []*updateWatch
}

func (s *service) register() {
	s.h.HandleFunc(Name+".lookup", s.handleLookup)
	s.h.HandleFunc(Name+".eventlog-watch", s.handleWatch)
	s.h.HandleFunc(Name+".eventlog-watch-cancel", s.handleWatchCancel)
	s.h.HandleFunc(Name+".update-lookup", s.handleUpdateLookup)
	s.h.HandleFunc(Name+".update-watch", s.handleUpdateWatch)
	s.h.HandleFunc(Name+".update-watch-cancel", s.handleUpdateWatchCancel)
	s.h.HandleFunc(Name+".disconnect", s.handleDisconnect)
	s.h.HandleFunc(Name+".stats-get", func(r *flux.Request) {
		r.Respond(map[string]any{"watchers": len(s.watches), "update_watchers": len(s.updates)})
	})
}

func (s *service) handleDisconnect(r *flux.Request) {
	route := r.Msg.RouteString()
	for k, w := range s.watches {
		if k.route == route {
			w.stop(false)
		}
	}
	kept := s.updates[:0]
	for _, u := range s.updates {
		if u.r.Msg.RouteString() == route {
			u.stop(false)
			continue
		}
		kept = append(kept, u)
	}
	s.updates = kept
}

// cancelAll ends every watch when the module unloads.
func (s *service) cancelAll() {
	for _, w := range s.watches {
		w.cancelUpstream()
	}
	for _, u := range s.updates {
		u.cancelUpstream()
	}
}
