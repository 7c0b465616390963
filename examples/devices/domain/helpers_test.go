package domain_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/examples/devices/domain/pgdomain"
)

var (
	viewer   = domain.User{ID: "vera", Roles: []string{domain.RoleViewer}}
	operator = domain.User{ID: "olivia", Roles: []string{domain.RoleOperator}}
	admin    = domain.User{ID: "adam", Roles: []string{domain.RoleAdmin}}
	nobody   = domain.User{ID: "nina"}
)

// backend is a kind of database the store runs on.
type backend struct {
	name string
	// newDB creates an empty database for t.
	newDB func(t *testing.T) *testDB
}

// testDB is one database of a test.
type testDB struct {
	// openStore opens another Store on the database: another replica,
	// when the database is PostgreSQL.
	openStore func() (*domain.Store, error)
	// raw is a direct handle for assertions that bypass the store.
	raw *sql.DB
	// url is the PostgreSQL database's URL, "" for SQLite.
	url string
}

// open opens another Store on the database, closed when the test ends.
func (db *testDB) open(t *testing.T) *domain.Store {
	t.Helper()
	return mustOpen(t, db.openStore)
}

// backends are SQLite (a file) and PostgreSQL (a database of pg; its cases
// skip when there is no server).
var backends = []backend{
	{"sqlite", func(t *testing.T) *testDB {
		path := filepath.Join(t.TempDir(), "devices.db")
		return &testDB{
			openStore: func() (*domain.Store, error) { return domain.Open(bg, path) },
			raw:       rawDB(t, path),
		}
	}},
	{"postgres", func(t *testing.T) *testDB {
		url := pg.Database(t)
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return &testDB{
			openStore: func() (*domain.Store, error) { return pgdomain.Open(bg, url) },
			raw:       db,
			url:       url,
		}
	}},
}

// forBackends runs f as a subtest per backend.
func forBackends(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// mustOpen opens a store, closed when the test ends.
func mustOpen(t *testing.T, open func() (*domain.Store, error)) *domain.Store {
	t.Helper()
	store, err := open()
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return store
}

// seeded opens a seeded store on a fresh database of b, and returns it
// with the database.
func (b backend) seeded(t *testing.T) (*domain.Store, *testDB) {
	t.Helper()
	db := b.newDB(t)
	store := db.open(t)
	if err := store.Seed(bg); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	return store, db
}

// openSeeded opens a seeded store on a fresh SQLite database and returns
// it with a raw handle on the database.
func openSeeded(t *testing.T) (*domain.Store, *sql.DB) {
	t.Helper()
	store, db := backends[0].seeded(t)
	return store, db.raw
}

// rawDB opens the database file directly, read-only, for assertions that
// do not go through the store.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// statusOf returns the status column of every device.
func statusOf(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT id, status FROM devices`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		out[id] = status
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// auditRow is one row of audit_log.
type auditRow struct {
	At, User, Action, Device, From, To, Reason string
}

// auditLog returns audit_log in insertion order.
func auditLog(t *testing.T, db *sql.DB) []auditRow {
	t.Helper()
	rows, err := db.Query(`SELECT at, user_id, action, device_id, from_status, to_status, reason FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		if err := rows.Scan(&r.At, &r.User, &r.Action, &r.Device, &r.From, &r.To, &r.Reason); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dbState is everything the assertions compare: statuses and the audit
// log.
type dbState struct {
	status map[string]string
	audit  []auditRow
}

func stateOf(t *testing.T, db *sql.DB) dbState {
	t.Helper()
	return dbState{statusOf(t, db), auditLog(t, db)}
}

// sqlOpen opens the database file for writing, bypassing the store.
func sqlOpen(path string) (*sql.DB, error) {
	return sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
}

// count returns the integer query selects on db.
func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// schemaVersion reads the schema version as b keeps it.
func schemaVersion(t *testing.T, b backend, db *sql.DB) int {
	t.Helper()
	if b.name == "sqlite" {
		return count(t, db, `PRAGMA user_version`)
	}
	return count(t, db, `SELECT version FROM devices_schema`)
}
