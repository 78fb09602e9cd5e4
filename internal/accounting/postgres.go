package accounting

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgUniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const pgUniqueViolation = "23505"

// postgresDuplicate is PostgresDialect's Duplicate: the key is the
// server's detail ("Key (name)=(physics) already exists.").
func postgresDuplicate(err error) (bool, string) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgUniqueViolation {
		return false, ""
	}
	key := pe.Detail
	if key == "" {
		key = pe.ConstraintName
	}
	return true, key
}

// OpenPostgres opens the accounting tables of cluster in the PostgreSQL
// database at url ("postgres://user@host:port/db" or a key=value string).
// Every cluster has a schema of its own named after it, so several
// instances can share one server and one database without seeing each
// other's banks and users (as slurmdbd keeps one set of tables per
// ClusterName). A server that cannot be reached is an error naming it.
func OpenPostgres(ctx context.Context, url, cluster string) (*SQLStore, error) {
	if err := checkName("cluster", cluster); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("accounting database %q: %w", url, err)
	}
	server := fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	schema := pgx.Identifier{"cluster_" + cluster}.Sanitize()
	cfg.RuntimeParams["search_path"] = "cluster_" + cluster
	db := stdlib.OpenDB(*cfg)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("accounting database server %s: %w", server, err)
	}
	if _, err := db.ExecContext(pctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("accounting database server %s: schema %s: %w", server, schema, err)
	}
	s, err := NewSQLStore(ctx, db, PostgresDialect)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("accounting database server %s: %w", server, err)
	}
	return s, nil
}
