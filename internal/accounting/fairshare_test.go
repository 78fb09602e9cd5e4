package accounting

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestDecayed(t *testing.T) {
	h := 7 * 24 * time.Hour
	for _, c := range []struct {
		age  time.Duration
		want float64
	}{{0, 8}, {h, 4}, {2 * h, 2}, {3 * h, 1}} {
		if got := Decayed(8, c.age, h); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Decayed(8, %v) = %v, want %v", c.age, got, c.want)
		}
	}
	if got := Decayed(8, h, 0); got != 8 {
		t.Errorf("no half-life: %v, want 8", got)
	}
}

// TestFairShareHand is the hand computation of docs/ACCOUNTING.md: root
// has banks A (3 shares) and B (1); A holds u1 and u2 (1 share each), B
// holds u3. u1 used 6 core-hours, u2 2, u3 none (8 in all).
//
//	u1: S = 3/4 * 1/2 = 0.375, U = 6/8 = 0.75, F = 2^(-2)   = 0.25
//	u2: S = 0.375,             U = 2/8 = 0.25, F = 2^(-2/3) = 0.63
//	u3: S = 1/4,               U = 0,          F = 1
//
// u4 in B has 0 shares and some usage: F = 0. u5 is inactive: no factor.
func TestFairShareHand(t *testing.T) {
	banks := []Bank{
		{Name: "root", Shares: 1, Active: true},
		{Name: "A", Parent: "root", Shares: 3, Active: true},
		{Name: "B", Parent: "root", Shares: 1, Active: true},
		{Name: "C", Parent: "root", Shares: 100}, // inactive: not a sibling
	}
	assocs := []Association{
		{Userid: 1, Bank: "A", Shares: 1, Active: true},
		{Userid: 2, Bank: "A", Shares: 1, Active: true},
		{Userid: 3, Bank: "B", Shares: 1, Active: true},
		{Userid: 4, Bank: "B", Shares: 0, Active: true},
		{Userid: 5, Bank: "A", Shares: 10},
	}
	usage := map[AssocKey]float64{{1, "A"}: 6, {2, "A"}: 2, {4, "B"}: 1e-9, {5, "A"}: 100}
	got := FairShare(banks, assocs, usage)
	want := map[AssocKey]float64{{1, "A"}: 0.25, {2, "A"}: math.Exp2(-2.0 / 3), {3, "B"}: 1, {4, "B"}: 0}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-6 {
			t.Errorf("%v: %v, want %v", k, got[k], w)
		}
	}
	if math.Abs(got[AssocKey{2, "A"}]-0.63) > 0.005 {
		t.Errorf("u2 = %v, the hand computation says 0.63", got[AssocKey{2, "A"}])
	}
}

func TestFairShareNoUsage(t *testing.T) {
	got := FairShare([]Bank{{Name: "root", Shares: 1, Active: true}},
		[]Association{{Userid: 1, Bank: "root", Shares: 1, Active: true}}, nil)
	if got[AssocKey{1, "root"}] != 1 {
		t.Fatalf("got %v, want 1 for an idle association", got)
	}
}

// benchTree is 10,000 users in 200 banks (issue 25's target: < 1 s).
func benchTree() ([]Bank, []Association, map[AssocKey]float64) {
	banks := []Bank{{Name: "root", Shares: 1, Active: true}}
	for i := range 200 {
		banks = append(banks, Bank{Name: fmt.Sprintf("bank%d", i), Parent: "root", Shares: int64(1 + i%7), Active: true})
	}
	var assocs []Association
	usage := map[AssocKey]float64{}
	for u := range 10000 {
		bank := fmt.Sprintf("bank%d", u%200)
		assocs = append(assocs, Association{Userid: uint32(1000 + u), Bank: bank, Shares: int64(1 + u%3), Active: true})
		usage[AssocKey{uint32(1000 + u), bank}] = float64(u % 97)
	}
	return banks, assocs, usage
}

func TestFairShareTarget(t *testing.T) {
	banks, assocs, usage := benchTree()
	start := time.Now()
	got := FairShare(banks, assocs, usage)
	el := time.Since(start)
	t.Logf("fair-share of %d associations in %d banks: %v", len(got), len(banks)-1, el)
	if len(got) != 10000 || el > time.Second {
		t.Fatalf("%d factors in %v (want 10000 in < 1s)", len(got), el)
	}
}

func BenchmarkFairShare10kUsers200Banks(b *testing.B) {
	banks, assocs, usage := benchTree()
	for b.Loop() {
		FairShare(banks, assocs, usage)
	}
}
