package accounting

import (
	"strings"
	"testing"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
)

// TestFairShareAlgorithm: [accounting.fairshare] algorithm picks the
// classic factor (the default) or Fair Tree; anything else, and any
// unknown key, is refused naming it.
func TestFairShareAlgorithm(t *testing.T) {
	banks := []acct.Bank{{Name: "root", Shares: 1, Active: true}, {Name: "A", Parent: "root", Shares: 3, Active: true}, {Name: "B", Parent: "root", Shares: 1, Active: true}}
	assocs := []acct.Association{{Userid: 1, Bank: "A", Shares: 1, Active: true}, {Userid: 2, Bank: "A", Shares: 1, Active: true}, {Userid: 3, Bank: "B", Shares: 1, Active: true}}
	usage := map[acct.AssocKey]float64{{Userid: 1, Bank: "A"}: 6, {Userid: 2, Bank: "A"}: 2}
	u1 := acct.AssocKey{Userid: 1, Bank: "A"}
	for conf, want := range map[string]float64{
		`{}`: 0.25, // classic: 2^(-0.75/0.375)
		`{"accounting":{"fairshare":{"algorithm":"classic"}}}`:   0.25,
		`{"accounting":{"fairshare":{"algorithm":"fair-tree"}}}`: 1.0 / 3, // rank 1 of 3
	} {
		c, err := parseFairShareConfig([]byte(conf))
		if err != nil {
			t.Fatalf("%s: %v", conf, err)
		}
		if got := c.factors(banks, assocs, usage)[u1]; got-want > 1e-12 || want-got > 1e-12 {
			t.Errorf("%s: u1's factor %v, want %v", conf, got, want)
		}
	}
	for conf, want := range map[string]string{
		`{"accounting":{"fairshare":{"algorithm":"fairtree"}}}`: `algorithm="fairtree": want "classic" or "fair-tree"`,
		`{"accounting":{"fairshare":{"algoritm":"fair-tree"}}}`: `unknown field "algoritm"`,
	} {
		if _, err := parseFairShareConfig([]byte(conf)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", conf, err, want)
		}
	}
}
