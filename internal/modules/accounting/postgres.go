package accounting

import (
	"encoding/json"
	"fmt"
	"strings"
)

// pgArgs are the module arguments that put the accounting database on
// a PostgreSQL server: database=URL (a pgx connection string) and
// cluster=NAME, the instance's own schema on it.
type pgArgs struct {
	url, cluster string
}

// check refuses a cluster without a database, a database without a
// cluster (two instances would share one set of banks by accident) and
// a database together with dbpath.
func (p pgArgs) check(path string) error {
	switch {
	case p.url == "" && p.cluster != "":
		return fmt.Errorf("accounting: cluster=%s needs database=URL", p.cluster)
	case p.url != "" && p.cluster == "":
		return fmt.Errorf("accounting: database=URL needs cluster=NAME (the instance's schema on the server)")
	case p.url != "" && path != "":
		return fmt.Errorf("accounting: dbpath and database are exclusive")
	}
	return nil
}

// fromConfig takes [accounting] database and cluster where the module
// arguments did not name a database.
func (p pgArgs) fromConfig(raw json.RawMessage, path string) (pgArgs, error) {
	if p.url != "" || path != "" || len(raw) == 0 {
		return p, nil
	}
	var top struct {
		Accounting struct {
			Database string `json:"database"`
			Cluster  string `json:"cluster"`
		} `json:"accounting"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return p, fmt.Errorf("[accounting] database, cluster: %v", err)
	}
	p = pgArgs{url: top.Accounting.Database, cluster: top.Accounting.Cluster}
	if err := p.check(""); err != nil {
		return p, fmt.Errorf("[accounting]: %s", strings.TrimPrefix(err.Error(), "accounting: "))
	}
	return p, nil
}
