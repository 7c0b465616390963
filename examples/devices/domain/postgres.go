package domain

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenPostgres opens the devices database on the PostgreSQL server url
// names (a postgres:// URL or keyword/value connection string, as pgx
// parses it) and migrates its schema. Several processes may open, migrate
// and [Store.Seed] one database at the same time: the schema steps and the
// seeding take an advisory lock (pg_advisory_xact_lock) and run once.
//
// The Store behaves as one opened with [Open]: same results, same errors.
// Its tables are devices, audit_log, idempotency_keys and devices_schema
// (the schema version) in the connection's default schema (and
// invocation_keys, in a database created by a previous release).
func OpenPostgres(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// The parser's message may quote the URL, password included.
		return nil, fmt.Errorf("%w: the PostgreSQL URL is malformed", ErrInvalid)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, dialect: dialectPostgres, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("domain: migrate the PostgreSQL database %s on %s: %w", cfg.Database, cfg.Host, err)
	}
	return s, nil
}
