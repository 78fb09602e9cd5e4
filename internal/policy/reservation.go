package policy

import (
	"encoding/json"
	"fmt"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// Reservation is an advance reservation (seed 003's DATs): from Start to
// End, the nodes it names run only the jobs of its users that ask for it
// (attributes.system.reservation = NAME, flux submit
// --setattr=reservation=NAME). Configured as
//
//	[reservations.maint]
//	ranks = "0-3"            # or hosts = "node[0-3]"
//	start = "2026-12-24 08:00"
//	end = "2026-12-24 18:00" # or duration = "10h"
//	users = ["alice", 1001]   # names or uids; the instance owner always may
type Reservation struct {
	Name  string
	Ranks string // an RFC 22 idset, or
	Hosts string // an RFC 29 hostlist (the scheduler maps it to ranks)
	Start float64
	End   float64
	Users map[uint32]bool
}

// timeLayouts are the local-time forms a reservation time may take
// (RFC 3339 with an offset is accepted too, and a number is seconds
// since the epoch).
var timeLayouts = []string{"2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05"}

func parseTime(path string, raw json.RawMessage) (float64, error) {
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, invalid("%s must be a time (\"YYYY-MM-DD HH:MM[:SS]\" or seconds since the epoch), not %s", path, raw)
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return float64(t.Unix()), nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
			return float64(t.Unix()), nil
		}
	}
	return 0, invalid("%s=%q: want \"YYYY-MM-DD HH:MM[:SS]\" (local time), RFC 3339 or seconds since the epoch", path, s)
}

// parseReservations reads the [reservations] table.
func parseReservations(raw map[string]json.RawMessage) (map[string]Reservation, error) {
	out := make(map[string]Reservation, len(raw))
	for name, v := range raw {
		path := "reservations." + name
		var r struct {
			Ranks    *string           `json:"ranks"`
			Hosts    *string           `json:"hosts"`
			Start    json.RawMessage   `json:"start"`
			End      json.RawMessage   `json:"end"`
			Duration *string           `json:"duration"`
			Users    []json.RawMessage `json:"users"`
		}
		dec := json.NewDecoder(strings.NewReader(string(v)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, invalid("%s: %v (keys: ranks or hosts, start, end or duration, users)", path, err)
		}
		res := Reservation{Name: name, Users: map[uint32]bool{}}
		switch {
		case (r.Ranks == nil) == (r.Hosts == nil):
			return nil, invalid("%s: give ranks or hosts (one of them)", path)
		case r.Ranks != nil:
			if _, err := idset.Parse(*r.Ranks); err != nil || *r.Ranks == "" {
				return nil, invalid("%s.ranks=%q: not an idset", path, *r.Ranks)
			}
			res.Ranks = *r.Ranks
		default:
			if _, err := hostlist.Parse(*r.Hosts); err != nil || *r.Hosts == "" {
				return nil, invalid("%s.hosts=%q: not a hostlist", path, *r.Hosts)
			}
			res.Hosts = *r.Hosts
		}
		if len(r.Start) == 0 {
			return nil, invalid("%s.start is missing", path)
		}
		var err error
		if res.Start, err = parseTime(path+".start", r.Start); err != nil {
			return nil, err
		}
		switch {
		case len(r.End) > 0 && r.Duration != nil:
			return nil, invalid("%s: give end or duration, not both", path)
		case len(r.End) > 0:
			if res.End, err = parseTime(path+".end", r.End); err != nil {
				return nil, err
			}
		case r.Duration != nil:
			d, err := fsd.Parse(*r.Duration)
			if err != nil || d <= 0 {
				return nil, invalid("%s.duration=%q: want a positive FSD (e.g. 10h)", path, *r.Duration)
			}
			res.End = res.Start + d
		default:
			return nil, invalid("%s: give end or duration", path)
		}
		if res.End <= res.Start {
			return nil, invalid("%s: end must come after start", path)
		}
		for _, u := range r.Users {
			uid, err := parseUser(u)
			if err != nil {
				return nil, invalid("%s.users: %v", path, err)
			}
			res.Users[uid] = true
		}
		out[name] = res
	}
	return out, nil
}

func parseUser(raw json.RawMessage) (uint32, error) {
	var n uint32
	if json.Unmarshal(raw, &n) == nil {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("%s is not a user name or uid", raw)
	}
	return LookupUID(s)
}

// LookupUID reads a uid, or a user name to look up.
func LookupUID(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("unknown user %q", s)
	}
	n64, _ := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(n64), nil
}

// reservationNames lists the reservations, sorted.
func (c *Config) reservationNames() string {
	names := make([]string, 0, len(c.Reservations))
	for n := range c.Reservations {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none are configured"
	}
	return strings.Join(names, ", ")
}

// CheckReservation says whether userid (the instance owner when owner)
// may submit a job asking for reservation name ("" for none) at now.
func (c *Config) CheckReservation(name string, userid uint32, owner bool, now float64) error {
	if name == "" {
		return nil
	}
	r, ok := c.Reservations[name]
	switch {
	case !ok:
		return fmt.Errorf("'%s' is not a reservation (reservations: %s)", name, c.reservationNames())
	case !owner && !r.Users[userid]:
		return fmt.Errorf("user %d may not use reservation '%s'", userid, name)
	case now >= r.End:
		return fmt.Errorf("reservation '%s' ended at %s", name, time.Unix(int64(r.End), 0).Format("2006-01-02 15:04:05"))
	}
	return nil
}
