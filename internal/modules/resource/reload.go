package resource

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// methodReload is the resource-define method of a reloaded inventory.
const methodReload = "reload"

// reload serves resource.reload {path, xml, force} (flux resource
// reload, mostly for tests): the inventory becomes the R in the file
// path, or, with xml, the R the hwloc topologies DIR/<rank>.xml describe.
// Ranks the instance does not have are refused unless force. While a
// scheduler holds the resources (an open resource.acquire) the inventory
// cannot change.
func (inv *inventory) reload(r *flux.Request) {
	var req struct {
		Path  string `json:"path"`
		XML   bool   `json:"xml"`
		Force bool   `json:"force"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may reload resources")
		return
	}
	if req.Path == "" {
		r.Errorf(syscall.EINVAL, "resource.reload: no path given")
		return
	}
	var R *rset.R
	var err error
	if req.XML {
		R, err = rFromXMLDir(req.Path)
	} else {
		R, err = rFromFile(req.Path)
	}
	if err != nil {
		r.RespondError(err)
		return
	}
	if last, ok := R.Ranks().Last(); ok && last >= uint(inv.size) {
		if !req.Force {
			// flux-core's words, its spelling included
			r.Errorf(syscall.EINVAL, "resource object contains ranks execeeding size=%d (override with -f): %s has ranks up to %d", inv.size, req.Path, last)
			return
		}
		inv.log.Warn(fmt.Sprintf("reloaded resources have ranks up to %d, beyond size=%d", last, inv.size))
	}
	if len(inv.acquirers) > 0 {
		r.Errorf(syscall.EBUSY, "resources are busy (unload scheduler?)")
		return
	}
	inv.reports = nil // a discovery in progress is over
	if err := inv.define(R, methodReload); err != nil {
		r.RespondError(err)
		return
	}
	// answer once resource.R and resource-define are committed
	inv.reslog.sync(func(err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(nil)
	})
}

// acquireMute serves resource.acquire-mute (flux resource acquire-mute):
// the open resource.acquire streams get no more up/down updates. The
// instance shuts down after it, so the scheduler is spared the offline
// updates of every rank leaving.
func (inv *inventory) acquireMute(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may mute resource.acquire")
		return
	}
	inv.mute = true
	r.Respond(nil)
}

// rFromFile reads an RFC 20 R from path.
func rFromFile(path string) (*rset.R, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	R, err := rset.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", path, err, syscall.EINVAL)
	}
	return R, nil
}

// rFromXMLDir builds an R from the hwloc topologies dir/<rank>.xml: each
// rank has the cores and GPUs of its topology, its NUMA domains (numa.go)
// and the topology's host name (no nodelist unless every topology names
// its host). Other files are ignored.
func rFromXMLDir(dir string) (*rset.R, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type node struct {
		rank uint
		l    local
		host string
	}
	var nodes []node
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".xml")
		if !ok || e.IsDir() {
			continue
		}
		rank, err := strconv.ParseUint(base, 10, 32)
		if err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		t, err := parseHwloc(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", path, err, syscall.EINVAL)
		}
		nodes = append(nodes, node{rank: uint(rank), l: t.local(), host: t.Hostname})
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%s: no <rank>.xml hwloc files: %w", dir, syscall.ENOENT)
	}
	slices.SortFunc(nodes, func(a, b node) int { return int(a.rank) - int(b.rank) })
	named := !slices.ContainsFunc(nodes, func(n node) bool { return n.host == "" })
	R := rset.New()
	var groups []rset.NUMAGroup
	for _, n := range nodes {
		if len(n.l.NUMA) > 0 {
			groups = append(groups, rset.NUMAGroup{Ranks: idset.New(n.rank), Domains: n.l.NUMA})
		}
		var hl *hostlist.Hostlist
		if named {
			hl = hostlist.New(n.host)
		}
		part, err := rset.NewNodes(idset.New(n.rank), hl, n.l.Cores, n.l.GPUs)
		if err == nil {
			R, err = R.Append(part)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: rank %d: %v: %w", dir, n.rank, err, syscall.EINVAL)
		}
	}
	if len(groups) > 0 {
		if err := R.SetNUMA(rset.MergeNUMA(nil, groups)); err != nil {
			return nil, fmt.Errorf("%s: NUMA domains: %v: %w", dir, err, syscall.EINVAL)
		}
	}
	return R, nil
}
