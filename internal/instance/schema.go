package instance

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fluxgo/fluxgo/internal/valuekind"
)

// The key schema of the instance configuration. Each module checks the
// values of the tables it reads; this checks the names, in one place, so
// that a misspelt key or table is an error that names it instead of a
// setting nobody reads:
//
//   - a key that no table of fluxgo or flux-core defines is refused
//     ("ingest.max-jobspec-sise: unknown key (known: ...)");
//   - a flux-core key that fluxgo accepts but does not act on is
//     accepted with a note (logged when the configuration is applied);
//   - a top-level table nobody reads is accepted with a note (sites keep
//     tables for other programs, such as flux-sched's), unless its name is
//     one edit or a spelling away from a known table ([job_shell] for
//     [job-shell]), which is refused with the name it resembles.

// schema describes one table.
type schema struct {
	// keys are the table's keys; a nil *schema is a value (or a table
	// whose content the module reading it checks).
	keys map[string]*schema
	// each, when set, is the schema of every entry of a table of named
	// tables ([queues.NAME], [reservations.NAME]).
	each *schema
	// ignored are flux-core keys that fluxgo accepts without acting on
	// them, with what to say about each.
	ignored map[string]string
	// open: any key is accepted (the table is checked whole by the
	// module that reads it, or belongs to another program).
	open bool
}

func table(keys ...string) *schema {
	s := &schema{keys: map[string]*schema{}}
	for _, k := range keys {
		s.keys[k] = nil
	}
	return s
}

func (s *schema) with(key string, sub *schema) *schema {
	s.keys[key] = sub
	return s
}

func (s *schema) ignoring(why string, keys ...string) *schema {
	if s.ignored == nil {
		s.ignored = map[string]string{}
	}
	for _, k := range keys {
		s.ignored[k] = why
	}
	return s
}

var openTable = &schema{open: true}

const notUsed = "a flux-core key fluxgo does not use"

// configSchema is the schema of the whole configuration.
func configSchema() *schema {
	jobSize := table().
		with("max", table("nnodes", "ncores", "ngpus")).
		with("min", table("nnodes", "ncores", "ngpus"))
	limits := table("duration").with("job-size", jobSize)
	access := table("allow-user", "allow-group")
	policy := func(defaults ...string) *schema {
		return table().
			with("limits", limits).
			with("jobspec", table().with("defaults", table().with("system", table(defaults...)))).
			with("access", access).
			with("scheduler", openTable) // read by the scheduler, opaque to the rest (RFC 33)
	}
	queue := table("requires", "preemptible", "preempt-mode", "gpu-share").with("policy", policy("duration"))
	// tables checked whole by the code that reads them
	checkedElsewhere := []string{
		"accounting",   // the accounting-limits plugin (unknown fields refused)
		"bootstrap",    // boot
		"tbon",         // boot
		"resource",     // resource.TableAttrs
		"sched-simple", // schedsimple.CheckTable
		"job-shell",    // shellproc.CheckTable
	}
	top := table()
	for _, name := range checkedElsewhere {
		top.with(name, openTable)
	}
	top.with("access", table("allow-guest-user", "allow-root-owner", "max-user-connections", "max-user-pending",
		"operator-groups", "operators").
		ignoring("fluxgo always limits a guest to their own jobs", "private-mode").
		ignoring(notUsed+" (access.operators and access.operator-groups name operators)", "roles"))
	top.with("archive", table("dbpath", "period").ignoring(notUsed, "busytimeout"))
	jm := table("inactive-age-limit", "inactive-num-limit", "plugins", "stop-queues-on-restart").
		ignoring(notUsed, "housekeeping")
	for _, t := range []string{"prolog", "epilog", "perilog"} {
		jm.with(t, openTable) // checked by the perilog plugin
	}
	top.with("job-manager", jm)
	top.with("exec", table("imp").
		ignoring(notUsed, "service", "service-override", "job-shell", "kill-timeout", "max-kill-count",
			"max-kill-timeout", "term-signal", "kill-signal", "barrier-timeout", "max-start-delay-percent",
			"testexec", "sdexec-properties", "sdexec-stop-timer-sec", "sdexec-stop-timer-signal"))
	top.with("ingest", table("max-jobspec-size").
		ignoring(notUsed+" (fluxgo validates jobspecs itself)", "validator", "frobnicator").
		ignoring(notUsed+" (fluxgo has no ingest workers)", "batch-count", "buffer-size"))
	top.with("heartbeat", table("period").ignoring(notUsed, "timeout", "warn_thresh"))
	top.with("kvs", table("checkpoint-period", "gc-threshold"))
	top.with("content-sqlite", table().ignoring(notUsed, "journal_mode", "synchronous", "preallocate", "vacuum_on_start"))
	top.with("systemd", table().ignoring(notUsed+" (fluxgo has no sdexec)", "enable", "sdbus-debug", "sdexec-debug"))
	top.with("mail", table("command", "from"))
	top.with("policy", policy("duration", "queue"))
	top.with("queues", &schema{each: queue})
	top.with("reservations", &schema{each: table("ranks", "hosts", "start", "end", "duration", "users")})
	return top
}

// checkSchema checks the names in a configuration against the schema:
// an error for a key nobody defines, notes for keys and tables accepted
// but not read.
func checkSchema(conf map[string]any) (notes []string, err error) {
	top := configSchema()
	for _, name := range sortedKeys(conf) {
		if _, ok := top.keys[name]; ok {
			continue
		}
		if _, ok := top.ignored[name]; ok {
			continue
		}
		if near := nearest(name, top); near != "" {
			return nil, fmt.Errorf("[%s]: unknown table (did you mean [%s]?)", name, near)
		}
		notes = append(notes, fmt.Sprintf("config: the [%s] table is not read by fluxgo (flux config get can show it)", name))
	}
	err = top.walk("", conf, &notes)
	return notes, err
}

func (s *schema) walk(path string, v any, notes *[]string) error {
	if s == nil || s.open {
		return nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		if path == "" {
			return nil
		}
		return fmt.Errorf("%s must be a table, not %s", path, valuekind.Of(v))
	}
	for _, k := range sortedKeys(t) {
		p := k
		if path != "" {
			p = path + "." + k
		}
		if s.each != nil {
			if err := s.each.walk(p, t[k], notes); err != nil {
				return err
			}
			continue
		}
		if sub, ok := s.keys[k]; ok {
			if err := sub.walk(p, t[k], notes); err != nil {
				return err
			}
			continue
		}
		if why, ok := s.ignored[k]; ok {
			*notes = append(*notes, fmt.Sprintf("config: %s is %s; it is ignored", p, why))
			continue
		}
		if path == "" {
			continue // top-level tables: checkSchema
		}
		return fmt.Errorf("%s: unknown key (known: %s)", p, strings.Join(s.known(), ", "))
	}
	return nil
}

// known lists the keys the table accepts.
func (s *schema) known() []string {
	k := slices.Collect(maps.Keys(s.keys))
	k = append(k, slices.Collect(maps.Keys(s.ignored))...)
	slices.Sort(k)
	return k
}

// nearest returns the known table name that name is probably a
// misspelling of, or "".
func nearest(name string, top *schema) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "-", " ", "-").Replace(s)) }
	for _, k := range top.known() {
		if norm(k) == norm(name) {
			return k
		}
	}
	if len(name) < 4 {
		return ""
	}
	for _, k := range top.known() {
		if len(k) >= 4 && editDistance(name, k) <= 1 {
			return k
		}
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
