package instance

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/fluxgo/fluxgo/internal/boot"
	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/modules/jobmanager"
	"github.com/fluxgo/fluxgo/internal/modules/resource"
	"github.com/fluxgo/fluxgo/internal/modules/schedsimple"
	"github.com/fluxgo/fluxgo/internal/shellproc"
	"github.com/fluxgo/fluxgo/internal/valuekind"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// ParseSetattrs turns NAME=VALUE strings into a map.
func ParseSetattrs(list []string) (map[string]string, error) {
	m := make(map[string]string, len(list))
	for _, kv := range list {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--setattr %q: want NAME=VALUE", kv)
		}
		m[name] = value
	}
	return m, nil
}

// LoadConfig reads the TOML configuration at path and checks the tables
// modules read from it (config.get) before any starts: a bad value is an
// error here rather than a module that fails to load in an instance that
// runs without it.
func LoadConfig(path string) (*boot.Config, error) {
	conf, err := boot.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := CheckConfig(conf.Table); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := conf.Check(); err != nil {
		return nil, err
	}
	return conf, nil
}

// CheckConfig checks the tables of a configuration that modules read
// (the job manager's are a superset of job-ingest's and sched-simple's).
func CheckConfig(table map[string]any) error {
	if _, err := checkSchema(table); err != nil {
		return err
	}
	if err := checkDurations(table); err != nil {
		return err
	}
	raw, err := json.Marshal(table)
	if err != nil {
		return err
	}
	if err := jobmanager.ValidateConfig(raw); err != nil {
		return err
	}
	for _, check := range []func(map[string]any) error{
		func(t map[string]any) error { _, err := resource.TableAttrs(t); return err },
		broker.CheckAccess, schedsimple.CheckTable, shellproc.CheckTable, checkGCThreshold,
	} {
		if err := check(table); err != nil {
			return err
		}
	}
	return nil
}

// ConfigNotes lists what the configuration sets that fluxgo accepts but
// does not act on (see schema.go), for the log.
func ConfigNotes(table map[string]any) []string {
	notes, _ := checkSchema(table)
	return notes
}

// tableDurations are configuration keys that set a module's duration
// attribute (an FSD), as flux-core's tables do.
var tableDurations = []struct{ table, key, attr string }{
	{"heartbeat", "period", "heartbeat.period"},
	{"kvs", "checkpoint-period", "kvs.checkpoint-period"},
}

// checkDurations checks those keys: positive FSDs.
func checkDurations(table map[string]any) error {
	for _, k := range tableDurations {
		t, _ := table[k.table].(map[string]any)
		v, ok := t[k.key]
		if !ok {
			continue
		}
		s, isString := v.(string)
		if !isString {
			return fmt.Errorf("%s.%s must be a duration string (FSD, e.g. \"2s\"), not %s", k.table, k.key, valuekind.Of(v))
		}
		if d, err := fsd.ParseDuration(s); err != nil || d <= 0 {
			return fmt.Errorf("%s.%s=%q: want a positive duration (FSD, e.g. \"2s\")", k.table, k.key, s)
		}
	}
	return nil
}

// checkGCThreshold checks [kvs] gc-threshold (read by content-sqlite):
// a non-negative integer, the KVS commits after which the instance
// collects the content store's garbage as it stops.
func checkGCThreshold(table map[string]any) error {
	t, _ := table["kvs"].(map[string]any)
	v, ok := t["gc-threshold"]
	if !ok {
		return nil
	}
	n, isInt := v.(int64)
	if !isInt || n < 0 {
		return fmt.Errorf("kvs.gc-threshold must be a non-negative integer (KVS commits between garbage collections as the instance stops; 0: never), not %s", valuekind.Of(v))
	}
	return nil
}

// jobRundir makes the rundir of a broker started by a job without -S
// rundir inside the job's FLUX_JOB_TMPDIR, which the job shell removes
// when the job ends: the directory goes even when the broker is killed
// before it can remove it. It returns "" outside a job, or when the
// sockets' paths there would be too long for a unix socket.
func jobRundir() (string, error) {
	base := os.Getenv("FLUX_JOB_TMPDIR")
	if base == "" {
		return "", nil
	}
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		return "", nil
	}
	// <base>/flux-NNNNNNNNNN/local, and tbon beside it
	if len(base)+len("/flux-1234567890/local") > boot.MaxSocketPath {
		return "", nil
	}
	dir, err := os.MkdirTemp(base, "flux-")
	if err != nil {
		return "", fmt.Errorf("rundir in FLUX_JOB_TMPDIR: %w", err)
	}
	return dir, nil
}

// applyConfigAttrs turns configuration tables that modules read as
// attributes into those attributes, unless -S already set them: the
// [resource] table (resource.TableAttrs; checked by checkConfig).
func applyConfigAttrs(table map[string]any, attrs map[string]string) {
	res, _ := resource.TableAttrs(table)
	for _, k := range tableDurations {
		if t, ok := table[k.table].(map[string]any); ok {
			if p, ok := t[k.key].(string); ok {
				if res == nil {
					res = map[string]string{}
				}
				res[k.attr] = p
			}
		}
	}
	for k, v := range res {
		if _, set := attrs[k]; !set {
			attrs[k] = v
		}
	}
}
