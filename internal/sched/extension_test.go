package sched

import (
	"slices"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// evenNodes is a filter plugin that allows only even node indexes.
type evenNodes struct{}

func (evenNodes) Name() string { return "even" }
func (evenNodes) Filter(_ *Pool, _ view, _ *Request, i, want int) int {
	if i%2 != 0 {
		return 0
	}
	return want
}

// notFirst is a prefer plugin that would rather not use node 0.
type notFirst struct{}

func (notFirst) Name() string { return "not-first" }
func (notFirst) Prefer(_ *Pool, _ view, _ *Request, i, want int) int {
	if i == 0 {
		return 0
	}
	return want
}

// TestProfilePlugins: plugins at the filter and prefer points change the
// nodes a search takes, under every fit, and the default profile is
// named.
func TestProfilePlugins(t *testing.T) {
	if got := DefaultProfile().Names(); !slices.Equal(got, []string{"filter:gpu-share", "prefer:numa", "prefer:nic"}) {
		t.Errorf("default profile %v", got)
	}
	for _, fit := range []Fit{FirstFit, WorstFit, BestFit} {
		p := sharedPool(t, 4, "0-1", "", 1)
		p.SetFit(fit)
		pr := DefaultProfile()
		pr.Filters = append(pr.Filters, evenNodes{})
		pr.Preferences = append(pr.Preferences, notFirst{})
		p.SetProfile(pr)
		a, err := p.Allocate(&Request{Nodes: 1, Slots: 1, SlotCores: 1}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Ranks(a).String(); got != "2" {
			t.Errorf("%s: one node went to rank %s, want 2 (odd filtered, 0 not preferred)", fit, got)
		}
		// two whole nodes: only 0 and 2 pass the filter, so 0 is used
		b, err := p.Allocate(&Request{Nodes: 2, Slots: 2, SlotCores: 1}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Ranks(b); !got.Equal(idset.MustParse("0,2")) {
			t.Errorf("%s: two nodes went to %s, want 0,2", fit, got)
		}
		if _, err := p.Allocate(&Request{Nodes: 3, Slots: 3, SlotCores: 1}, 0); err == nil {
			t.Errorf("%s: three nodes allocated where the filter allows two", fit)
		}
	}
	// the gpu-share filter stays when GPUs are shared
	p := sharedPool(t, 1, "0-1", "0-1", 2)
	p.SetProfile(Profile{})
	if got := p.Profile().Names(); !slices.Equal(got, []string{"filter:gpu-share"}) {
		t.Errorf("shared pool's profile without gpu-share: %v", got)
	}
}
