package resource

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

func TestVerifyCheck(t *testing.T) {
	want := rset.Node{Rank: 3, Hostname: "n3", Cores: idset.MustParse("0-7"), GPUs: idset.MustParse("0-1")}
	for _, tc := range []struct {
		v    Verify
		got  helloPayload
		want string
	}{
		{DefaultVerify, helloPayload{Rank: 3, Hostname: "n3", Cores: "0-15", GPUs: ""}, ""},
		{DefaultVerify, helloPayload{Rank: 3, Hostname: "n3", Cores: "0-3"}, "rank 3 (n3): missing core 4-7 (found 0-3)"},
		{DefaultVerify, helloPayload{Rank: 3, Hostname: "vm", Cores: "0-7"}, "rank 3 (vm): hostname is vm, not n3 as configured"},
		{Verify{verifyStrict, verifyStrict, verifyStrict, true}, helloPayload{Rank: 3, Hostname: "n3", Cores: "0-8", GPUs: "0"},
			"rank 3 (n3): extra core 8, missing gpu 1 (found 0)"},
		{Verify{verifyIgnore, verifyAllowMissing, verifyIgnore, true}, helloPayload{Rank: 3, Hostname: "x", Cores: "0"}, ""},
	} {
		if got := tc.v.check(want, tc.got); got != tc.want {
			t.Errorf("%+v %+v: %q, want %q", tc.v, tc.got, got, tc.want)
		}
	}
}

func TestParseVerify(t *testing.T) {
	for in, want := range map[string]Verify{
		"true":             {verifyStrict, verifyStrict, verifyStrict, true},
		"false":            {verifyIgnore, verifyIgnore, verifyIgnore, true},
		`{}`:               {verifyStrict, verifyStrict, verifyStrict, true},
		`{"gpu":"ignore"}`: {verifyStrict, verifyStrict, verifyIgnore, true},
		`{"default":"ignore","core":"allow-extra"}`: {verifyIgnore, verifyAllowExtra, verifyIgnore, true},
	} {
		got, err := parseVerify(in)
		if err != nil || got != want {
			t.Errorf("parseVerify(%s) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"cores":"strict"}`: "resource.verify.cores: unknown key",
		`{"gpu":"lax"}`:      "resource.verify.gpu: want strict, allow-extra, allow-missing or ignore, not lax",
		`"x"`:                "resource.verify: want true, false or a table",
	} {
		if _, err := parseVerify(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseVerify(%s): %v, want %q", in, err, want)
		}
	}
}

func TestExcludeOutOfRange(t *testing.T) {
	R, _ := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}]}}`))
	if _, err := excludeRanks("1", R); err != nil {
		t.Fatal(err)
	}
	if _, err := excludeRanks("1-5", R); err == nil || !strings.Contains(err.Error(), "resource.exclude: rank 2-5 is not in the inventory (ranks 0-1)") {
		t.Fatalf("exclude 1-5: %v", err)
	}
}

// TestVerifyDrains: a configured inventory that is not this host's (a
// hostname it does not have, cores it lacks) drains the rank with the
// reason; noverify leaves it.
func TestVerifyDrains(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name, config, noverify, want string
	}{
		{"cores", `[{"hosts":"` + host + `","cores":"0-99999"}]`, "", "missing core"},
		{"hostname", `[{"hosts":"nosuchhost0","cores":"0"}]`, "", "hostname is " + host + ", not nosuchhost0 as configured"},
		{"noverify", `[{"hosts":"nosuchhost0","cores":"0-99999"}]`, "true", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]string{"resource.config": tc.config}
			if tc.noverify != "" {
				attrs["resource.noverify"] = tc.noverify
			}
			inst, _ := startInstance(t, 1, attrs)
			h := inst.Handle(0)
			deadline := time.Now().Add(10 * time.Second)
			for {
				st := getStatus(t, h, 0)
				d, drained := st.Drain["0"]
				if tc.want == "" {
					if drained {
						t.Fatalf("drained with noverify: %q", d.Reason)
					}
					if st.R != nil {
						return
					}
				} else if drained {
					if !strings.Contains(d.Reason, tc.want) {
						t.Fatalf("reason %q, want %q", d.Reason, tc.want)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("status %+v", st)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
