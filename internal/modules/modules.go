// Package modules lists the broker modules compiled into fluxgo and the
// set rc1 loads by default. Adding a module means adding it here: there is
// no init()-time registration.
package modules

import (
	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/accounting"
	"github.com/fluxgo/fluxgo/internal/modules/content"
	"github.com/fluxgo/fluxgo/internal/modules/contentsqlite"
	"github.com/fluxgo/fluxgo/internal/modules/heartbeat"
	"github.com/fluxgo/fluxgo/internal/modules/jobarchive"
	"github.com/fluxgo/fluxgo/internal/modules/jobexec"
	"github.com/fluxgo/fluxgo/internal/modules/jobinfo"
	"github.com/fluxgo/fluxgo/internal/modules/jobingest"
	"github.com/fluxgo/fluxgo/internal/modules/joblist"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/jobpool"
	"github.com/fluxgo/fluxgo/internal/modules/jobshell"
	"github.com/fluxgo/fluxgo/internal/modules/kvs"
	"github.com/fluxgo/fluxgo/internal/modules/kvswatch"
	"github.com/fluxgo/fluxgo/internal/modules/pymod"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/internal/modules/rexec"
	"github.com/fluxgo/fluxgo/internal/modules/schedsimple"
)

// Registry returns every compiled-in module by name.
func Registry() *module.Registry {
	r := module.NewRegistry()
	for name, f := range builtin() {
		if err := r.Register(name, f); err != nil {
			panic(err) // a duplicate in the list below is a programming error
		}
	}
	return r
}

func builtin() map[string]module.Factory {
	return map[string]module.Factory{
		content.Name:       content.New,
		contentsqlite.Name: contentsqlite.New,
		heartbeat.Name:     heartbeat.New,
		kvs.Name:           kvs.New,
		kvswatch.Name:      kvswatch.New,
		resource.Name:      resource.New,
		schedsimple.Name:   schedsimple.New,
		"rexec":            rexec.New,
		"job-manager":      jobmanager.New,
		jobinfo.Name:       jobinfo.New,
		joblist.Name:       joblist.New,
		"job-ingest":       jobingest.New,
		jobpool.Name:       jobpool.New,
		jobarchive.Name:    jobarchive.New,
		"job-exec":         jobexec.New,
		"job-shell":        jobshell.New,
		pymod.Name:         pymod.New,
		accounting.Name:    accounting.New,
	}
}

// DefaultRC1 is the module set rc1 loads, in load order (rc3 unloads in
// reverse).
func DefaultRC1() []broker.ModuleSpec {
	return []broker.ModuleSpec{
		// the content store first: everything else may keep data in it
		{Name: content.Name, Ranks: "all", Args: []string{"backing-module=" + contentsqlite.Name}},
		{Name: contentsqlite.Name, Ranks: "0"},
		{Name: heartbeat.Name, Ranks: "0"},
		{Name: kvs.Name, Ranks: "all"},
		{Name: kvswatch.Name, Ranks: "all"},
		{Name: resource.Name, Ranks: "all"},
		{Name: schedsimple.Name, Ranks: "0"},
		{Name: "rexec", Ranks: "all", Builtin: true},
		{Name: "job-manager", Ranks: "0"},
		{Name: jobinfo.Name, Ranks: "0"},
		{Name: joblist.Name, Ranks: "0"},
		{Name: "job-ingest", Ranks: "0"},
		{Name: jobpool.Name, Ranks: "0"},
		// after job-ingest and job-manager: it sends them the database
		{Name: accounting.Name, Ranks: "0"},
		{Name: "job-shell", Ranks: "all", Builtin: true},
		{Name: "job-exec", Ranks: "0"},
		// with an [archive] table: inactive jobs copied to SQLite
		{Name: jobarchive.Name, Ranks: "0", IfConfig: "archive"},
	}
}
