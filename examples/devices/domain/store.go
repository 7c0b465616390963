package domain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Store is the devices domain service on a SQLite ([Open]) or PostgreSQL
// ([OpenPostgresDB]) database; both behave the same. It is safe for
// concurrent use, and several Stores (processes) may share one PostgreSQL
// database.
type Store struct {
	db      *sql.DB
	dialect dialect
	now     func() time.Time

	closeOnce sync.Once
	closeErr  error
}

// schemaVersion is the schema version this package migrates to, kept in
// PRAGMA user_version on SQLite and in the devices_schema table on
// PostgreSQL.
const schemaVersion = 3

// migrations[i] takes the schema from version i to i+1, in the markers of
// [dialect.sql].
func migrations() [][]string {
	return [][]string{{
		`CREATE TABLE IF NOT EXISTS devices (
			id         {text} PRIMARY KEY,
			name       {text} NOT NULL,
			status     TEXT NOT NULL CHECK (status IN ('online', 'offline', 'disabled')),
			site       {text} NOT NULL,
			updated_at TEXT NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS devices_status ON devices (status)`,
		`CREATE INDEX IF NOT EXISTS devices_site ON devices (site)`,
		`CREATE TABLE IF NOT EXISTS audit_log (
			id          {serial},
			at          TEXT NOT NULL,
			user_id     TEXT NOT NULL,
			action      TEXT NOT NULL CHECK (action IN ('disable', 'enable')),
			device_id   {text} NOT NULL REFERENCES devices (id),
			from_status TEXT NOT NULL,
			to_status   TEXT NOT NULL,
			reason      TEXT NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS audit_log_device ON audit_log (device_id, id)`,
	}, {
		// Version 2 added invocation_keys, the idempotency keys of
		// Disable and Enable keyed by (user_id, invocation_key): per
		// user, so that one agent's key answered another's call with the
		// first one's result. Version 3 replaces it; a database below
		// version 2 never gets it.
	}, {
		// The idempotency keys of Disable and Enable calls, per user and
		// consumer (the SHA-256 of Key.Consumer): see DisableOnce. A
		// version 2 database keeps its invocation_keys table for the
		// replicas of the previous release that still run during a
		// rolling deploy; nothing here reads it, and none of its keys is
		// replayed, as no consumer can be told it was theirs.
		`CREATE TABLE IF NOT EXISTS idempotency_keys (
			user_id        {text} NOT NULL,
			consumer       {text} NOT NULL,
			invocation_key {text} NOT NULL,
			action         TEXT NOT NULL CHECK (action IN ('disable', 'enable')),
			digest         TEXT NOT NULL,
			changed        INTEGER NOT NULL,
			created_at     TEXT NOT NULL,
			expires_at     TEXT NOT NULL,
			PRIMARY KEY (user_id, consumer, invocation_key)
		)`,
		`CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys (expires_at)`,
	}}
}

// maxConns bounds the connections of a file database.
const maxConns = 8

// dsnParams configure every connection: a busy timeout (so concurrent
// writers wait instead of failing), write-ahead logging, foreign keys, and
// BEGIN IMMEDIATE for transactions, so that a transaction that reads then
// writes takes the write lock up front and cannot fail to upgrade.
const dsnParams = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// Open opens the SQLite devices database at path, creating it if needed, and
// migrates its schema; it is safe to open an existing database again.
// path is a file name (it may not contain '?'), or ":memory:" for a
// private in-memory database held by a single connection. The database is
// empty: call [Store.Seed] for the example's devices.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.Contains(path, "?") {
		return nil, fmt.Errorf("%w: the database path must be non-empty and must not contain '?'", ErrInvalid)
	}
	db, err := sql.Open("sqlite", path+"?"+dsnParams)
	if err != nil {
		return nil, fmt.Errorf("domain: open %s: %w", path, err)
	}
	if path == ":memory:" {
		// Each connection would get its own empty database.
		db.SetMaxOpenConns(1)
	} else {
		// Connections are kept for reuse (database/sql keeps 2 idle by
		// default): under concurrent reads the pool would otherwise open
		// and close connections all the time, each paying for its pragmas.
		// More than a few per core gain nothing: the driver is Go code.
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
	}
	s := &Store{db: db, dialect: dialectSQLite, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("domain: migrate %s: %w", path, err)
	}
	return s, nil
}

// migrate brings the schema to schemaVersion in one transaction. On
// PostgreSQL the transaction first takes an advisory lock, so that Stores
// opening a database at the same time migrate one after the other.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.lockSchema(ctx, tx); err != nil {
		return err
	}
	version, err := s.schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if version > schemaVersion {
		return fmt.Errorf("the database schema version %d is newer than this program's (%d)", version, schemaVersion)
	}
	steps := migrations()
	for v := version; v < schemaVersion; v++ {
		for _, stmt := range steps[v] {
			if _, err := tx.ExecContext(ctx, s.dialect.sql(stmt)); err != nil {
				return err
			}
		}
	}
	if version != schemaVersion {
		if err := s.setSchemaVersion(ctx, tx, schemaVersion); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// schemaLockKey is the PostgreSQL advisory lock that serialises this
// package's migrations and seeding on one database.
const schemaLockKey int64 = 0x6465766963657300 // "devices\0"

// lockSchema takes the schema lock until tx ends, on PostgreSQL; SQLite's
// transactions are serialised already (BEGIN IMMEDIATE).
func (s *Store) lockSchema(ctx context.Context, tx *sql.Tx) error {
	if s.dialect != dialectPostgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey)
	return err
}

// schemaVersion reads the schema version: 0 for a new database.
func (s *Store) schemaVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	var version int
	if s.dialect == dialectSQLite {
		err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version)
		return version, err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS devices_schema (
		singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
		version   INTEGER NOT NULL
	)`); err != nil {
		return 0, err
	}
	err := tx.QueryRowContext(ctx, `SELECT version FROM devices_schema`).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return version, err
}

// setSchemaVersion records the schema version.
func (s *Store) setSchemaVersion(ctx context.Context, tx *sql.Tx, version int) error {
	if s.dialect == dialectSQLite {
		// PRAGMA takes no parameters; the value is a constant.
		_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, version))
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO devices_schema (version) VALUES ($1)
		ON CONFLICT (singleton) DO UPDATE SET version = excluded.version`, version)
	return err
}

// Close closes the database. It is idempotent and returns the first
// call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

// seedDevices are the example's devices.
func seedDevices() []Device {
	return []Device{
		{ID: "d1", Name: "edge-gw-ams-01", Status: StatusOnline, Site: "Amsterdam"},
		{ID: "d2", Name: "edge-gw-ams-02", Status: StatusOnline, Site: "Amsterdam"},
		{ID: "d3", Name: "sensor-hub-ams-03", Status: StatusOnline, Site: "Amsterdam"},
		{ID: "d4", Name: "camera-lobby-ams-04", Status: StatusOffline, Site: "Amsterdam"},
		{ID: "d5", Name: "edge-gw-fra-01", Status: StatusOnline, Site: "Frankfurt"},
		{ID: "d6", Name: "edge-gw-fra-02", Status: StatusOffline, Site: "Frankfurt"},
		{ID: "d7", Name: "pos-terminal-fra-03", Status: StatusOnline, Site: "Frankfurt"},
		{ID: "d8", Name: "edge-gw-lon-01", Status: StatusOnline, Site: "London"},
		{ID: "d9", Name: "badge-reader-lon-02", Status: StatusOffline, Site: "London"},
		{ID: "d10", Name: "hvac-ctrl-lon-03", Status: StatusOffline, Site: "London"},
		{ID: "d11", Name: "printer-lon-04", Status: StatusDisabled, Site: "London"},
		{ID: "d12", Name: "kiosk-ber-01", Status: StatusOnline, Site: "Berlin"},
	}
}

// Seed inserts the example's twelve devices (d1 … d12 at four sites) when
// the devices table is empty, and does nothing otherwise. Stores seeding
// one database at the same time seed it once.
func (s *Store) Seed(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("domain: seed: %w", err)
	}
	defer tx.Rollback()
	if err := s.lockSchema(ctx, tx); err != nil {
		return fmt.Errorf("domain: seed: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM devices`).Scan(&n); err != nil {
		return fmt.Errorf("domain: seed: %w", err)
	}
	if n > 0 {
		return nil
	}
	now := s.now()
	for i, d := range seedDevices() {
		at := now.Add(-time.Duration(i) * 7 * time.Minute) // staggered last reports
		if _, err := tx.ExecContext(ctx, s.dialect.sql(`INSERT INTO devices (id, name, status, site, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`),
			d.ID, d.Name, string(d.Status), d.Site, formatTime(at)); err != nil {
			return fmt.Errorf("domain: seed: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("domain: seed: %w", err)
	}
	return nil
}

// timeLayout stores times as fixed-width UTC text, so they sort as text.
const timeLayout = "2006-01-02T15:04:05.000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("domain: a stored time is malformed")
	}
	return t, nil
}
