package accounting

import (
	"math"
	"testing"
)

// TestFairTree: the hand computation of docs/ACCOUNTING.md. root has
// banks A (3 shares) and B (1); u1 and u2 are in A with 1 share each,
// u3 in B; u1 used 6 core-hours, u2 2, u3 none. At root, A's level
// fair-share is (3/4)/(8/8) = 0.75 and B's (1/4)/0 = infinite: B first,
// so u3 has rank 3 of 3. In A, u2's is (1/2)/(2/8) = 2, u1's
// (1/2)/(6/8) = 0.67: u2 rank 2, u1 rank 1.
func TestFairTree(t *testing.T) {
	banks := []Bank{{Name: "root", Shares: 1, Active: true}, {Name: "A", Parent: "root", Shares: 3, Active: true}, {Name: "B", Parent: "root", Shares: 1, Active: true}}
	assocs := []Association{
		{Userid: 1, Bank: "A", Shares: 1, Active: true},
		{Userid: 2, Bank: "A", Shares: 1, Active: true},
		{Userid: 3, Bank: "B", Shares: 1, Active: true},
	}
	usage := map[AssocKey]float64{{1, "A"}: 6, {2, "A"}: 2}
	got := FairTree(banks, assocs, usage)
	want := map[AssocKey]float64{{1, "A"}: 1.0 / 3, {2, "A"}: 2.0 / 3, {3, "B"}: 1}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-12 {
			t.Errorf("%v: %v, want %v", k, got[k], w)
		}
	}
	// u3 uses 3: B has used 3/11 for a 1/4 share, A 8/11 for 3/4; A's
	// level fair-share (3/4)/(8/11) = 1.03 is above B's (1/4)/(3/11) =
	// 0.92, so both of A's users now come before u3, u1 too
	usage[AssocKey{3, "B"}] = 3
	got = FairTree(banks, assocs, usage)
	want = map[AssocKey]float64{{2, "A"}: 1, {1, "A"}: 2.0 / 3, {3, "B"}: 1.0 / 3}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-12 {
			t.Errorf("B at 3: %v: %v, want %v", k, got[k], w)
		}
	}
	// ties share the higher rank; an inactive association gets none; a
	// user of no shares who used something comes last with 0
	assocs = append(assocs, Association{Userid: 4, Bank: "B", Shares: 1, Active: false}, Association{Userid: 5, Bank: "B", Shares: 0, Active: true})
	usage = map[AssocKey]float64{{5, "B"}: 1}
	got = FairTree(banks, assocs, usage)
	if _, ok := got[AssocKey{4, "B"}]; ok {
		t.Errorf("the inactive association has a factor: %v", got)
	}
	// root: A (3/4 share, no usage) first: u1 and u2 tied at rank 4 of 4
	if got[AssocKey{1, "A"}] != 1 || got[AssocKey{2, "A"}] != 1 || got[AssocKey{3, "B"}] != 0.5 || got[AssocKey{5, "B"}] != 0 {
		t.Errorf("ties and no shares: %v", got)
	}
}

// FuzzFairTree: any shares and usage give factors in [0,1] for exactly
// the active associations of active banks, without a panic.
func FuzzFairTree(f *testing.F) {
	f.Add(int64(3), int64(1), int64(1), 6.0, 2.0, 0.0, true)
	f.Fuzz(func(t *testing.T, sa, sb, su int64, u1, u2, u3 float64, active bool) {
		banks := []Bank{{Name: "root", Shares: 1, Active: true}, {Name: "A", Parent: "root", Shares: sa, Active: true}, {Name: "B", Parent: "A", Shares: sb, Active: active}}
		assocs := []Association{{Userid: 1, Bank: "A", Shares: su, Active: true}, {Userid: 2, Bank: "B", Shares: 1, Active: true}, {Userid: 3, Bank: "root", Shares: 1, Active: true}}
		usage := map[AssocKey]float64{{1, "A"}: math.Abs(u1), {2, "B"}: math.Abs(u2), {3, "root"}: math.Abs(u3)}
		got := FairTree(banks, assocs, usage)
		for k, v := range got {
			if v < 0 || v > 1 || math.IsNaN(v) {
				t.Fatalf("%v: factor %v", k, v)
			}
		}
		if _, ok := got[AssocKey{2, "B"}]; ok != active {
			t.Fatalf("the association of bank B (active %v): %v", active, got)
		}
	})
}

func BenchmarkFairTree10kUsers200Banks(b *testing.B) {
	banks, assocs, usage := benchTree()
	for b.Loop() {
		FairTree(banks, assocs, usage)
	}
}
