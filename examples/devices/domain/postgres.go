package domain

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// OpenPostgresDB returns the Store of the devices database on db, a
// PostgreSQL database opened with any database/sql driver, after it has
// migrated its schema. Package pgdomain opens one from a URL with pgx
// (pgdomain.Open): this package imports no PostgreSQL driver, so that a
// program that uses SQLite alone links none.
//
// Several processes may open, migrate and [Store.Seed] one database at
// the same time: the schema steps and the seeding take an advisory lock
// (pg_advisory_xact_lock) and run once. The Store behaves as one opened
// with [Open]: same results, same errors. Its tables are devices,
// audit_log, idempotency_keys and devices_schema (the schema version) in
// the connection's default schema (and invocation_keys, in a database
// created by a previous release).
//
// OpenPostgresDB sets db's pool limits. The Store owns db once it is
// returned ([Store.Close] closes it); on an error, db is the caller's to
// close.
func OpenPostgresDB(ctx context.Context, db *sql.DB) (*Store, error) {
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, dialect: dialectPostgres, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("domain: migrate the PostgreSQL database: %w", err)
	}
	return s, nil
}
