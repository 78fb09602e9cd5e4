package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// ErrConfig is the kind of every configuration error.
var ErrConfig = errors.New("resource configuration error")

// Config is the resource module's configuration, read from broker
// attributes (flux start -S NAME=VALUE; the instance's TOML [resource]
// table sets the same names, see TableAttrs):
//
//	resource.config        a JSON array of [[resource.config]] entries
//	resource.config-file   a TOML file holding [[resource.config]] tables
//	                       (and optionally resource.path, resource.exclude)
//	resource.path          an RFC 20 R file: the inventory
//	resource.hwloc-xml     an hwloc XML file to discover cores and GPUs
//	                       from, instead of /sys
//	resource.exclude       ranks (idset) or hosts (hostlist) withheld
//	                       from scheduling
//	resource.scheduling    a JSON file: R's "scheduling" key (for a
//	                       scheduler that reads one)
//	resource.monitor-force-up  "1"/"true": every rank is up whether or
//	                       not its broker runs (fake inventories in test)
//	resource.discover-timeout  FSD; how long rank 0 waits for the next
//	                       rank's report of its resources before it
//	                       leaves out those that have not reported
//	                       (default 30s; each report restarts it)
//	resource.verify        true, false or a JSON table (verify.go)
//	resource.noverify      "1"/"true": no rank is verified
//
// An instance that runs as a job of another (flux batch, flux alloc) has
// the broker attributes parent-uri and jobid; without config entries or a
// path, its inventory is that job's R, fetched from the enclosing
// instance (see jobR). Otherwise, without config entries or a path, every
// rank discovers its own resources and reports them to rank 0.
type Config struct {
	Entries         []ConfigEntry
	Path            string
	HwlocXML        string
	Exclude         string
	Scheduling      string // a file whose JSON becomes R's scheduling key
	ForceUp         bool
	DiscoverTimeout time.Duration
	// Verify says how each rank's part of a configured inventory is
	// checked against its host (verify.go; resource.verify and
	// resource.noverify).
	Verify Verify
	// ParentURI and JobID (attributes parent-uri and jobid) locate the
	// job this instance runs as, if any.
	ParentURI string
	JobID     string
}

// ConfigEntry is one [[resource.config]] table: the hosts it applies to
// (RFC 29 hostlist) and the cores, GPUs (RFC 22 idsets) and properties it
// gives them. A host named by several entries gets the union. NUMA
// declares the hosts' NUMA domains (confignuma.go).
type ConfigEntry struct {
	Hosts      string         `json:"hosts" toml:"hosts"`
	Cores      string         `json:"cores" toml:"cores"`
	GPUs       string         `json:"gpus" toml:"gpus"`
	Properties []string       `json:"properties" toml:"properties"`
	NUMA       []ConfigDomain `json:"numa,omitempty" toml:"numa"`
}

// DefaultDiscoverTimeout bounds rank 0's wait for resource reports.
const DefaultDiscoverTimeout = 30 * time.Second

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.DiscoverTimeout <= 0 {
		return fmt.Errorf("%w: resource.discover-timeout must be positive", ErrConfig)
	}
	for i, e := range c.Entries {
		if e.Hosts == "" {
			return fmt.Errorf("%w: resource.config[%d]: hosts is required", ErrConfig, i)
		}
	}
	return nil
}

// loadConfig reads the configuration from broker attributes.
func loadConfig(ctx context.Context, h *flux.Handle, args []string) (*Config, error) {
	c := &Config{DiscoverTimeout: DefaultDiscoverTimeout, Verify: DefaultVerify}
	// the [resource] table of the configuration as it is now (a reload
	// since the broker started counts at the module's next load), over
	// the broker attributes the start-up configuration set
	var current map[string]string
	var conf map[string]any
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &conf); err == nil {
		if current, err = TableAttrs(conf); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	attr := func(name string) string {
		if v, ok := current[name]; ok {
			return v
		}
		v, err := h.Attr(ctx, name)
		if err != nil {
			return ""
		}
		return v
	}
	if v := attr("resource.config-file"); v != "" {
		if err := c.readTOML(v); err != nil {
			return nil, err
		}
	}
	if v := attr("resource.config"); v != "" {
		entries, err := parseConfigJSON([]byte(v))
		if err != nil {
			return nil, err
		}
		c.Entries = entries
	}
	if v := attr("resource.path"); v != "" {
		c.Path = v
	}
	if v := attr("resource.exclude"); v != "" {
		c.Exclude = v
	}
	c.HwlocXML = attr("resource.hwloc-xml")
	if c.HwlocXML == "" {
		// flux-core's testing variable: a topology file instead of
		// this machine's
		c.HwlocXML = os.Getenv("FLUX_HWLOC_XMLFILE")
	}
	c.Scheduling = attr("resource.scheduling")
	c.ParentURI = attr("parent-uri")
	c.JobID = attr("jobid")
	if v := attr("resource.monitor-force-up"); v != "" {
		b, err := parseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: resource.monitor-force-up: %v", ErrConfig, err)
		}
		c.ForceUp = b
	}
	if v := attr("resource.verify"); v != "" {
		vf, err := parseVerify(v)
		if err != nil {
			return nil, err
		}
		c.Verify = vf
	}
	if v := attr("resource.noverify"); v != "" {
		b, err := parseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: resource.noverify: %v", ErrConfig, err)
		}
		if b {
			c.Verify = noVerify
		}
	}
	if v := attr("resource.discover-timeout"); v != "" {
		d, err := fsd.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%w: resource.discover-timeout: %v", ErrConfig, err)
		}
		c.DiscoverTimeout = d
	}
	if err := c.applyArgs(args); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

// applyArgs applies the module arguments flux-core's resource module
// takes:
//
//	monitor-force-up  every rank is up whether or not its broker runs
//	                  (as resource.monitor-force-up=1)
//	noverify          no rank is checked against its host (as
//	                  resource.noverify=1)
//	notruncate        keep the whole resource.eventlog at start-up;
//	                  fluxgo never truncates it, so this changes nothing
//
// Anything else is an error naming the argument.
func (c *Config) applyArgs(args []string) error {
	for _, a := range args {
		switch a {
		case "monitor-force-up":
			c.ForceUp = true
		case "noverify":
			c.Verify = noVerify
		case "notruncate":
		default:
			return fmt.Errorf("%w: unknown module argument %q (known: monitor-force-up, noverify, notruncate)", ErrConfig, a)
		}
	}
	return nil
}

// noVerify checks nothing (resource.noverify, the noverify argument).
var noVerify = Verify{verifyIgnore, verifyIgnore, verifyIgnore, true}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean", v)
}

// parseConfigJSON reads a JSON array of config entries, strictly.
func parseConfigJSON(data []byte) ([]ConfigEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var entries []ConfigEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("%w: resource.config: %s", ErrConfig, describeJSONError(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: resource.config: data after the array", ErrConfig)
	}
	return entries, nil
}

// describeJSONError says what a decoding error of config entries means
// in the configuration's terms (the key, what it wants), not Go's.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "a string"
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int64, reflect.Pointer:
			want = "a number"
		case reflect.Slice:
			want = "an array of strings"
			if te.Type.Elem().Kind() == reflect.Struct {
				want = "an array of tables"
			}
		case reflect.Struct:
			want = "a table"
		}
		key := te.Field
		if key == "" {
			return fmt.Sprintf("want an array of tables, not %s %s", article(te.Value), te.Value)
		}
		return fmt.Sprintf("%s: want %s, not %s %s", key, want, article(te.Value), te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Sprintf("unknown key %s (an entry has hosts, cores, gpus, properties and numa; a numa domain cores, gpus, socket, nics and memory)", name)
	}
	return err.Error()
}

func article(kind string) string {
	if strings.IndexByte("aeiou", kind[0]) >= 0 {
		return "an"
	}
	return "a"
}

// readTOML reads [[resource.config]] tables, resource.path and
// resource.exclude from a TOML file. Other tables are left to their own
// subsystems; unknown keys in a [[resource.config]] table are errors.
func (c *Config) readTOML(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: resource.config-file: %v", ErrConfig, err)
	}
	var doc struct {
		Resource struct {
			Config  []ConfigEntry `toml:"config"`
			Path    string        `toml:"path"`
			Exclude string        `toml:"exclude"`
		} `toml:"resource"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	for _, k := range md.Undecoded() {
		if len(k) >= 3 && k[0] == "resource" && k[1] == "config" {
			return fmt.Errorf("%w: %s: unknown key %s in [[resource.config]]", ErrConfig, path, k)
		}
	}
	c.Entries = doc.Resource.Config
	c.Path = doc.Resource.Path
	c.Exclude = doc.Resource.Exclude
	return nil
}

// hostEntry accumulates what the config entries give one host.
type hostEntry struct {
	cores, gpus idset.Set
	props       []string
	numa        []rset.NUMADomain
	numaFrom    []int // the entry each of numa comes from
}

// buildConfigR turns config entries into the instance R. Ranks follow
// the broker hostlist when it names exactly the configured hosts, once
// each (as in a system instance); otherwise hosts are ranked in the order
// the entries first name them.
func buildConfigR(entries []ConfigEntry, brokerHosts []string) (*rset.R, error) {
	var order []string
	hosts := make(map[string]*hostEntry)
	for i, e := range entries {
		hl, err := hostlist.Parse(e.Hosts)
		if err != nil {
			return nil, fmt.Errorf("%w: resource.config[%d].hosts: %v", ErrConfig, i, err)
		}
		var cores, gpus idset.Set
		if e.Cores != "" {
			if cores, err = idset.Parse(e.Cores); err != nil {
				return nil, fmt.Errorf("%w: resource.config[%d].cores: %v", ErrConfig, i, err)
			}
		}
		if e.GPUs != "" {
			if gpus, err = idset.Parse(e.GPUs); err != nil {
				return nil, fmt.Errorf("%w: resource.config[%d].gpus: %v", ErrConfig, i, err)
			}
		}
		for _, p := range e.Properties {
			if err := rset.CheckPropertyName(p); err != nil {
				return nil, fmt.Errorf("%w: resource.config[%d].properties: %v", ErrConfig, i, err)
			}
		}
		doms, err := entryDomains(i, e, cores, gpus) // confignuma.go
		if err != nil {
			return nil, err
		}
		for h := range hl.All() {
			he := hosts[h]
			if he == nil {
				he = &hostEntry{}
				hosts[h] = he
				order = append(order, h)
			}
			he.cores = he.cores.Union(cores)
			he.gpus = he.gpus.Union(gpus)
			he.props = append(he.props, e.Properties...)
			if err := he.addDomains(h, i, doms); err != nil {
				return nil, err
			}
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%w: resource.config names no hosts", ErrConfig)
	}
	if sameHosts(order, brokerHosts) {
		order = brokerHosts
	}
	// group ranks with the same children, then build each group at once
	type group struct {
		ranks idset.Set
		hosts []string
		cores idset.Set
		gpus  idset.Set
	}
	var groups []*group
	byKey := make(map[string]*group)
	props := make(map[string]idset.Set)
	for rank, h := range order {
		he := hosts[h]
		if he.cores.Empty() {
			return nil, fmt.Errorf("%w: resource.config: host %s has no cores", ErrConfig, h)
		}
		key := he.cores.String() + "|" + he.gpus.String()
		g := byKey[key]
		if g == nil {
			g = &group{cores: he.cores, gpus: he.gpus}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.ranks.Add(uint(rank))
		g.hosts = append(g.hosts, h)
		for _, p := range he.props {
			s := props[p]
			s.Add(uint(rank))
			props[p] = s
		}
	}
	R := rset.New()
	for _, g := range groups {
		part, err := rset.NewNodes(g.ranks, hostlist.New(g.hosts...), g.cores, g.gpus)
		if err != nil {
			return nil, fmt.Errorf("%w: resource.config: %v", ErrConfig, err)
		}
		if R, err = R.Append(part); err != nil {
			return nil, fmt.Errorf("%w: resource.config: %v", ErrConfig, err)
		}
	}
	for p, ranks := range props {
		if err := R.SetProperty(p, ranks); err != nil {
			return nil, fmt.Errorf("%w: resource.config: %v", ErrConfig, err)
		}
	}
	if err := setConfigNUMA(R, order, hosts); err != nil {
		return nil, err
	}
	return R, nil
}

// sameHosts reports whether b names exactly the hosts of a, once each.
func sameHosts(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]bool, len(a))
	for _, h := range a {
		seen[h] = true
	}
	for _, h := range b {
		if !seen[h] {
			return false
		}
		delete(seen, h)
	}
	return len(seen) == 0
}

// readRFile reads the inventory from an R file (resource.path).
func readRFile(path string) (*rset.R, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: resource.path: %v", ErrConfig, err)
	}
	r, err := rset.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: resource.path %s: %v", ErrConfig, path, err)
	}
	return r, nil
}

// setScheduling puts the JSON in file path into R's scheduling key
// (resource.scheduling).
func setScheduling(R *rset.R, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: resource.scheduling: %v", ErrConfig, err)
	}
	discovered, _ := R.NUMA() // from hwloc (numa.go): kept unless the file has its own
	if err := R.SetScheduling(data); err != nil {
		return fmt.Errorf("%w: resource.scheduling %s: %v", ErrConfig, path, err)
	}
	if own, err := R.NUMA(); discovered != nil && err == nil && own == nil {
		_ = R.SetNUMA(discovered) // fails only for a value that is not an object: it wins as it is
	}
	return nil
}

// excludeRanks resolves resource.exclude (an idset of ranks or a
// hostlist) against the inventory.
func excludeRanks(spec string, r *rset.R) (idset.Set, error) {
	if spec == "" {
		return idset.Set{}, nil
	}
	if ids, err := idset.Parse(spec); err == nil {
		if extra := ids.Difference(r.Ranks()); !extra.Empty() {
			return idset.Set{}, fmt.Errorf("%w: resource.exclude: rank %s is not in the inventory (ranks %s)", ErrConfig, extra, orNone(r.Ranks()))
		}
		return ids, nil
	}
	hl, err := hostlist.Parse(spec)
	if err != nil {
		return idset.Set{}, fmt.Errorf("%w: resource.exclude %q is neither an idset nor a hostlist", ErrConfig, spec)
	}
	ranks, err := r.RanksOf(hl)
	if err != nil {
		hosts := "none"
		if nl := r.Nodelist(); nl != nil && nl.Len() > 0 {
			hosts = nl.String()
		}
		return idset.Set{}, fmt.Errorf("%w: resource.exclude %q: %v is not in the inventory (hosts %s; or give ranks, an idset such as 0-3)", ErrConfig, spec, err, hosts)
	}
	return ranks, nil
}
