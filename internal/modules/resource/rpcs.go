package resource

import (
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// This file holds flux-core's smaller resource RPCs: resource.topo-get
// (any rank: its hwloc topology) and resource.expiration-update (rank
// 0: move the end of the instance's resources).

// topoGet answers with this rank's topology as hwloc XML: the configured
// resource.hwloc-xml file, or one written from what discovery finds (a
// machine with one package of N cores of one PU each), which flux
// resource reload -x reads back into the same R.
func (m *member) topoGet(r *flux.Request) {
	if m.cfg.HwlocXML != "" {
		data, err := os.ReadFile(m.cfg.HwlocXML)
		if err != nil {
			r.Errorf(syscall.ENOENT, "resource.hwloc-xml: %v", err)
			return
		}
		r.RespondRaw(data)
		return
	}
	l, err := discover("")
	if err != nil {
		r.RespondError(err)
		return
	}
	r.RespondRaw([]byte(synthHwlocXML(m.hostname, l.Cores.Count())))
}

// synthHwlocXML writes a minimal hwloc v2 topology of ncores cores.
func synthHwlocXML(host string, ncores int) string {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n")
	b.WriteString("<topology version=\"2.0\">\n  <object type=\"Machine\" os_index=\"0\">\n")
	fmt.Fprintf(&b, "    <info name=\"HostName\" value=\"%s\"/>\n", xmlEscape(host))
	b.WriteString("    <info name=\"Backend\" value=\"fluxgo\"/>\n    <object type=\"Package\" os_index=\"0\">\n")
	for i := range ncores {
		fmt.Fprintf(&b, "      <object type=\"Core\" os_index=\"%d\"><object type=\"PU\" os_index=\"%d\"/></object>\n", i, i)
	}
	b.WriteString("    </object>\n  </object>\n</topology>\n")
	return b.String()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\"", "&quot;").Replace(s)
}

// expirationUpdate serves resource.expiration-update {expiration}: the
// instance's resources now end at expiration (0: never). R's expiration
// changes, a resource-update event records it, and the scheduler hears
// of it on its acquire stream.
func (inv *inventory) expirationUpdate(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may update the expiration")
		return
	}
	var req struct {
		Expiration *float64 `json:"expiration"`
	}
	if err := r.Msg.UnmarshalPayload(&req); err != nil || req.Expiration == nil {
		r.Errorf(syscall.EPROTO, "Protocol error")
		return
	}
	exp := *req.Expiration
	if exp < 0 || math.IsNaN(exp) || math.IsInf(exp, 0) {
		r.Errorf(syscall.EINVAL, "expiration=%v: must be a time in seconds since the epoch, or 0", exp)
		return
	}
	if inv.R == nil {
		r.Errorf(syscall.EAGAIN, "the inventory is not defined yet")
		return
	}
	if err := inv.R.SetTimes(inv.R.StartTime(), exp); err != nil {
		r.Errorf(syscall.EINVAL, "expiration=%v: %v", exp, err)
		return
	}
	inv.reslog.pending.Put(rKey, inv.R.Encode())
	inv.reslog.post("resource-update", map[string]any{"expiration": exp})
	for _, a := range inv.acquirers {
		a.r.Respond(map[string]any{"expiration": exp})
	}
	inv.reslog.sync(func(err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(nil)
	})
}
