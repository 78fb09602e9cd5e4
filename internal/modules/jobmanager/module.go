// Package jobmanager is the job-manager broker module: it drives every job
// through the RFC 21 state machine by posting events to the job's
// eventlog, asks the scheduler for resources (RFC 27) and the executor to
// run jobs (RFC 32), runs jobtap plugins at each step, and streams every
// event to journal subscribers.
package jobmanager

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap/builtin"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
)

// Module is the job-manager module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return "job-manager" }

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	ownerStr, err := h.Attr(ctx, "security.owner")
	if err != nil {
		return err
	}
	owner, err := strconv.ParseUint(ownerStr, 10, 32)
	if err != nil {
		return fmt.Errorf("security.owner=%q: %w", ownerStr, err)
	}
	var conf json.RawMessage
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &conf); err != nil {
		return fmt.Errorf("config.get: %w", err)
	}
	pol, purgeConf, err := readConfig(conf)
	if err != nil {
		return err
	}
	directives, err := parseDirectives(conf)
	if err != nil {
		return err
	}
	m := newManager(h, flux.NewLogger(h, "job-manager"), uint32(owner))
	m.conf = conf
	if s, err := h.Attr(ctx, "hostlist"); err == nil {
		m.hosts, _ = hostlist.Parse(s) // without it, ranks stand for hosts
	}
	m.queues = newQueues(m, pol)
	if err := m.queues.restore(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // unloaded while starting: nothing is wrong
		}
		m.log.Error("queue state from the last run not restored", "err", err)
	}
	m.register()
	for _, name := range builtin.Defaults() {
		if err := m.plugins.load(name, pluginConf(name, pol)); err != nil {
			return err
		}
	}
	if err := m.plugins.applyDirectives(directives); err != nil {
		return err
	}
	if dir, _ := h.Attr(ctx, "statedir"); dir != "" {
		m.snap.Path = filepath.Join(dir, snapshotFile)
	} else {
		m.scratch = true
	}
	n, failed, err := m.restore(ctx)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil && !m.load.on {
		m.snap.Whole() // every job was read before serving
	}
	switch {
	case err != nil:
		m.log.Error("restoring jobs from the KVS failed", "err", err)
	case failed > 0:
		m.log.Error(fmt.Sprintf("restored %d jobs from the KVS; %d job records could not be read (see above) and are left out", n, failed))
	case n > 0:
		m.log.Info(fmt.Sprintf("restored %d jobs from the KVS", n))
	}
	m.setPurgeLimits(purgeConf)
	// tell a scheduler and an executor that said hello to an earlier
	// job manager (this one was reloaded) to say it again
	if err := h.Publish("job-manager.online", map[string]any{"generation": m.generation}, false); err != nil {
		m.log.Error("publishing job-manager.online", "err", err)
	}
	err = h.Serve(ctx)
	final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.finalIndex(final)
	m.snap.Final()
	return err
}

// readConfig reads what the job manager takes from the instance
// configuration: the job policy ([policy], [queues]) and the purge
// limits ([job-manager]).
func readConfig(conf json.RawMessage) (*policy.Config, purgeLimits, error) {
	pol, err := policy.Parse(conf)
	if err != nil {
		return nil, purgeLimits{}, err
	}
	purge, err := purgeConfig(conf)
	if err == nil {
		_, err = stopQueuesOnRestart(conf)
	}
	return pol, purge, err
}

// ValidateConfig checks the tables of the instance configuration (as
// config.get returns it) that the job manager reads, so that a broker
// refuses to start with a bad one instead of running without a job
// manager, and a reload is refused before any module takes it.
func ValidateConfig(conf json.RawMessage) error {
	// "error updating job-manager" as flux-core words a refused reload
	if _, _, err := readConfig(conf); err != nil {
		return fmt.Errorf("error updating job-manager: %w", err)
	}
	if _, err := parseDirectives(conf); err != nil {
		return fmt.Errorf("error updating job-manager: %w", err)
	}
	return nil
}

// configPlugins are the default plugins configured from the instance
// configuration (pluginConf).
var configPlugins = []string{".limit-duration", ".limit-job-size"}

// configReload takes a new instance configuration (flux config reload):
// limits, queues and purge limits. Everything is checked before anything
// changes. Limits apply to jobs submitted or updated from now on.
func (m *manager) configReload(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may reload the configuration")
		return
	}
	pol, purge, err := readConfig(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	var swaps []func()
	for _, name := range configPlugins {
		swap, err := m.plugins.prepareReload(name, pluginConf(name, pol))
		if err != nil {
			r.RespondError(err)
			return
		}
		if swap != nil {
			swaps = append(swaps, swap)
		}
	}
	applyConf, err := m.plugins.prepareConfigUpdate(r.Msg.JSON())
	if err != nil {
		r.RespondError(err)
		return
	}
	for _, swap := range swaps {
		swap()
	}
	m.conf = append(json.RawMessage(nil), r.Msg.JSON()...)
	applyConf()
	m.queues.reconfigure(pol)
	m.setPurgeLimits(purge)
	r.Respond(nil)
}

// pluginConf is the configuration a default plugin gets from the
// policy.limits tables: the instance's limit, and under "queues" those
// of the queues that set their own (nil: none).
func pluginConf(name string, p *policy.Config) json.RawMessage {
	conf, queues := map[string]any{}, map[string]any{}
	switch name {
	case ".limit-duration":
		if p.Duration != "" {
			conf["duration"] = p.Duration
		}
		for qname, q := range p.Queues {
			if q.Duration != "" {
				queues[qname] = q.Duration
			}
		}
	case ".limit-job-size":
		_, general := p.Limits("")
		for bound, counts := range general {
			conf[bound] = counts
		}
		for qname, q := range p.Queues {
			if q.JobSize != nil {
				_, queues[qname] = p.Limits(qname)
			}
		}
	}
	if len(queues) > 0 {
		conf["queues"] = queues
	}
	if len(conf) == 0 {
		return nil
	}
	b, _ := json.Marshal(conf)
	return b
}
