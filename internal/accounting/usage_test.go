package accounting

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"
)

// usageSuite runs on every backend: periods written, replaced, read per
// association and per bank.
func usageSuite(t *testing.T, s UsageStore) {
	ctx := context.Background()
	const day = 86400
	if err := s.SetUsage(ctx, []UsagePeriod{
		{Username: "alice", Bank: "physics", Start: 0, Jobs: 2, CoreHours: 1.5},
		{Username: "bob", Bank: "physics", Start: 0, Jobs: 1, CoreHours: 4},
		{Username: "alice", Bank: "chem", Start: day, Jobs: 1, CoreHours: 0.25},
		{Username: "alice", Bank: "physics", Start: day, Jobs: 1, CoreHours: 1},
	}); err != nil {
		t.Fatal(err)
	}
	// the pass recomputes a period: the new totals replace the old
	if err := s.SetUsage(ctx, []UsagePeriod{{Username: "alice", Bank: "physics", Start: day, Jobs: 3, CoreHours: 2}}); err != nil {
		t.Fatal(err)
	}
	alice, err := s.UsageHistory(ctx, UsageFilter{Username: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	want := []UsagePeriod{
		{Username: "alice", Bank: "physics", Start: 0, Jobs: 2, CoreHours: 1.5},
		{Username: "alice", Bank: "chem", Start: day, Jobs: 1, CoreHours: 0.25},
		{Username: "alice", Bank: "physics", Start: day, Jobs: 3, CoreHours: 2},
	}
	if !reflect.DeepEqual(want, alice) {
		t.Errorf("alice's history:\n got %+v\nwant %+v", alice, want)
	}
	banks, err := s.UsageHistory(ctx, UsageFilter{Bank: "physics", Group: GroupBank})
	if err != nil {
		t.Fatal(err)
	}
	want = []UsagePeriod{{Bank: "physics", Start: 0, Jobs: 3, CoreHours: 5.5}, {Bank: "physics", Start: day, Jobs: 3, CoreHours: 2}}
	if !reflect.DeepEqual(want, banks) {
		t.Errorf("bank physics by period:\n got %+v\nwant %+v", banks, want)
	}
	if later, err := s.UsageHistory(ctx, UsageFilter{Since: day}); err != nil || len(later) != 2 {
		t.Errorf("since day 1: %v %v", later, err)
	}
	if first, err := s.UsageHistory(ctx, UsageFilter{Until: day}); err != nil || len(first) != 2 {
		t.Errorf("until day 1: %v %v", first, err)
	}
	// totals over the periods, per association, user and bank
	for _, c := range []struct {
		f    UsageFilter
		want []UsagePeriod
	}{
		{UsageFilter{Total: true}, []UsagePeriod{
			{Username: "alice", Bank: "chem", Start: day, Jobs: 1, CoreHours: 0.25},
			{Username: "alice", Bank: "physics", Start: 0, Jobs: 5, CoreHours: 3.5},
			{Username: "bob", Bank: "physics", Start: 0, Jobs: 1, CoreHours: 4}}},
		{UsageFilter{Group: GroupUser, Total: true}, []UsagePeriod{
			{Username: "alice", Start: 0, Jobs: 6, CoreHours: 3.75},
			{Username: "bob", Start: 0, Jobs: 1, CoreHours: 4}}},
		{UsageFilter{Group: GroupBank, Total: true, Since: day}, []UsagePeriod{
			{Bank: "chem", Start: day, Jobs: 1, CoreHours: 0.25},
			{Bank: "physics", Start: day, Jobs: 3, CoreHours: 2}}},
		{UsageFilter{Group: GroupUser, Username: "alice"}, []UsagePeriod{
			{Username: "alice", Start: 0, Jobs: 2, CoreHours: 1.5},
			{Username: "alice", Start: day, Jobs: 4, CoreHours: 2.25}}},
	} {
		got, err := s.UsageHistory(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.want, got) {
			t.Errorf("UsageHistory(%+v):\n got %+v\nwant %+v", c.f, got, c.want)
		}
	}
	if _, err := s.UsageHistory(ctx, UsageFilter{Group: "queue"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("group queue: %v, want ErrInvalid", err)
	}
	if last, err := s.LastUsagePeriod(ctx); err != nil || last != day {
		t.Errorf("LastUsagePeriod = %d, %v; want %d", last, err, day)
	}
	// more rows than one statement takes, written again with new totals
	many := make([]UsagePeriod, 2*usageBatch+7)
	for i := range many {
		many[i] = UsagePeriod{Username: fmt.Sprintf("u%d", i), Bank: "big", Start: 10 * day, Jobs: 1, CoreHours: 1}
	}
	for round := int64(1); round <= 2; round++ {
		for i := range many {
			many[i].Jobs = round
		}
		if err := s.SetUsage(ctx, many); err != nil {
			t.Fatal(err)
		}
		got, err := s.UsageHistory(ctx, UsageFilter{Bank: "big", Group: GroupBank, Total: true})
		if err != nil || len(got) != 1 || got[0].Jobs != round*int64(len(many)) {
			t.Errorf("round %d: bank big: %+v %v", round, got, err)
		}
	}
	for _, bad := range []UsagePeriod{{Username: "a b", Bank: "x"}, {Username: "a", Bank: "x", CoreHours: -1}, {Username: "a", Bank: "x", CoreHours: math.NaN()}} {
		if err := s.SetUsage(ctx, []UsagePeriod{bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetUsage(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestUsageHistory(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) *SQLStore
	}{
		{"sqlite", func(t *testing.T) *SQLStore {
			s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "a.sqlite"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"postgres", func(t *testing.T) *SQLStore { return openPostgres(t) }},
	} {
		t.Run(b.name, func(t *testing.T) { usageSuite(t, b.open(t)) })
	}
}
