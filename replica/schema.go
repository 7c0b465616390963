package replica

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaVersion is the version of the tables Migrate creates.
const schemaVersion = 1

// schema creates the tables of every replica: the replicas and their
// leases, the session directory (hashed keys only) and the audit trail.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS agentsurface_schema (
		version integer NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS agentsurface_replicas (
		id         text PRIMARY KEY,
		name       text NOT NULL,
		addr       text NOT NULL,
		started_at timestamptz NOT NULL DEFAULT now(),
		expires_at timestamptz NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS agentsurface_sessions (
		key        bytea PRIMARY KEY,
		replica    text NOT NULL REFERENCES agentsurface_replicas (id) ON DELETE CASCADE,
		claimed_at timestamptz NOT NULL DEFAULT now()
	)`,
	`CREATE INDEX IF NOT EXISTS agentsurface_sessions_replica ON agentsurface_sessions (replica)`,
	`CREATE TABLE IF NOT EXISTS agentsurface_audit (
		id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		replica         text NOT NULL,
		session         text,
		at              timestamptz NOT NULL,
		type            text NOT NULL,
		capability_id   text,
		registration_id text,
		invocation_id   text,
		confirmation_id text,
		consumer_id     text,
		status          text,
		code            text,
		duration_ms     bigint,
		queue_wait_ms   bigint,
		execution_ms    bigint,
		actor           text,
		reason          text,
		input           json,
		output          json,
		truncated       boolean NOT NULL DEFAULT false,
		recorded_at     timestamptz NOT NULL DEFAULT now()
	)`,
	`CREATE INDEX IF NOT EXISTS agentsurface_audit_at ON agentsurface_audit (at)`,
	`CREATE INDEX IF NOT EXISTS agentsurface_audit_invocation ON agentsurface_audit (invocation_id) WHERE invocation_id IS NOT NULL`,
}

// Migrate creates the tables this package uses, if they do not exist:
// agentsurface_replicas (each replica and its lease),
// agentsurface_sessions (which replica owns each session, by a keyed hash
// of its token) and agentsurface_audit (the audit records of every
// replica). It is idempotent and safe to run from several replicas
// starting at once (they take turns on an advisory lock). Run it once at
// start, before [OpenDirectory] and [NewAuditSink]; the role needs the
// right to create tables, or an operator runs it once with one that does.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("replica: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Concurrent CREATE TABLE IF NOT EXISTS can still collide in the
	// catalogs; the lock makes the replicas take turns.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agentsurface.migrate'))`); err != nil {
		return fmt.Errorf("replica: migrate: %w", err)
	}
	for _, stmt := range schema {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("replica: migrate: %w", err)
		}
	}
	var v int
	err = tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM agentsurface_schema`).Scan(&v)
	if err != nil {
		return fmt.Errorf("replica: migrate: %w", err)
	}
	switch {
	case v > schemaVersion:
		return fmt.Errorf("replica: migrate: the database has schema version %d, newer than this build's %d", v, schemaVersion)
	case v < schemaVersion:
		if _, err := tx.Exec(ctx, `INSERT INTO agentsurface_schema (version) VALUES ($1)`, schemaVersion); err != nil {
			return fmt.Errorf("replica: migrate: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("replica: migrate: %w", err)
	}
	return nil
}
