package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// stageLog records the events of every job seen on the journal, to show
// where jobs spend their time: the median delay from each event to the
// next, over all jobs.
type stageLog struct {
	jobs  map[uint64][]stageEvent
	order []string // event names in first-seen order
	seen  map[string]bool
}

type stageEvent struct {
	name string
	t    float64
}

func newStageLog() *stageLog {
	return &stageLog{jobs: make(map[uint64][]stageEvent), seen: make(map[string]bool)}
}

func (s *stageLog) add(p []byte) {
	var e struct {
		ID     uint64 `json:"id"`
		Events []struct {
			Name      string  `json:"name"`
			Timestamp float64 `json:"timestamp"`
		} `json:"events"`
	}
	if json.Unmarshal(p, &e) != nil {
		return
	}
	for _, ev := range e.Events {
		s.jobs[e.ID] = append(s.jobs[e.ID], stageEvent{ev.Name, ev.Timestamp})
		if !s.seen[ev.Name] {
			s.seen[ev.Name] = true
			s.order = append(s.order, ev.Name)
		}
	}
}

// report prints "prev→next median (p90)" for each consecutive pair of
// events, in the order events were first seen.
func (s *stageLog) report() string {
	delays := map[string][]float64{}
	var pairs []string
	for _, evs := range s.jobs {
		for i := 1; i < len(evs); i++ {
			k := evs[i-1].name + "→" + evs[i].name
			if _, ok := delays[k]; !ok {
				pairs = append(pairs, k)
			}
			delays[k] = append(delays[k], evs[i].t-evs[i-1].t)
		}
	}
	rank := map[string]int{}
	for i, n := range s.order {
		rank[n] = i
	}
	sort.Slice(pairs, func(a, b int) bool {
		pa, pb := strings.Split(pairs[a], "→"), strings.Split(pairs[b], "→")
		return rank[pa[1]] < rank[pb[1]]
	})
	var b strings.Builder
	for _, k := range pairs {
		d := delays[k]
		sort.Float64s(d)
		fmt.Fprintf(&b, "        %-22s median %8.2f ms  p90 %8.2f ms  (%d jobs)\n", k, d[len(d)/2]*1e3, d[len(d)*9/10]*1e3, len(d))
	}
	return b.String()
}
