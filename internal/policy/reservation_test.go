package policy

import (
	"strings"
	"testing"
)

func TestParseReservations(t *testing.T) {
	c, err := Parse([]byte(`{"reservations":{"m":{"hosts":"node[0-1]","start":"2026-12-24 08:00","duration":"10h","users":["root",1001]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Reservations["m"]
	if r.Hosts != "node[0-1]" || r.End-r.Start != 36000 || !r.Users[0] || !r.Users[1001] || len(r.Users) != 2 {
		t.Fatalf("parsed %+v", r)
	}
	if err := c.CheckReservation("m", 1001, false, r.Start-10); err != nil {
		t.Errorf("listed user: %v", err)
	}
	if err := c.CheckReservation("m", 1002, false, r.Start); err == nil || !strings.Contains(err.Error(), "may not use") {
		t.Errorf("other user: %v", err)
	}
	if err := c.CheckReservation("m", 1002, true, r.Start); err != nil {
		t.Errorf("owner: %v", err)
	}
	if err := c.CheckReservation("m", 1001, false, r.End); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Errorf("after the end: %v", err)
	}
	for conf, want := range map[string]string{
		`{"start":1,"end":2}`:                                        "give ranks or hosts",
		`{"ranks":"0","hosts":"a","start":1,"end":2}`:                "give ranks or hosts",
		`{"ranks":"x","start":1,"end":2}`:                            "not an idset",
		`{"ranks":"0","end":2}`:                                      "start is missing",
		`{"ranks":"0","start":"tomorrow","end":2}`:                   "reservations.r.start=\"tomorrow\"",
		`{"ranks":"0","start":5,"end":2}`:                            "end must come after start",
		`{"ranks":"0","start":1,"end":2,"duration":"1h"}`:            "not both",
		`{"ranks":"0","start":1}`:                                    "give end or duration",
		`{"ranks":"0","start":1,"duration":"-1h"}`:                   "positive FSD",
		`{"ranks":"0","start":1,"end":2,"users":["no-such-user-x"]}`: "unknown user",
		`{"ranks":"0","start":1,"end":2,"color":"red"}`:              "unknown field",
	} {
		_, err := Parse([]byte(`{"reservations":{"r":` + conf + `}}`))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", conf, err, want)
		}
	}
}
