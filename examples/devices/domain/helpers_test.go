package domain_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
)

var (
	viewer   = domain.User{ID: "vera", Roles: []string{domain.RoleViewer}}
	operator = domain.User{ID: "olivia", Roles: []string{domain.RoleOperator}}
	admin    = domain.User{ID: "adam", Roles: []string{domain.RoleAdmin}}
	nobody   = domain.User{ID: "nina"}
)

// openSeeded opens a seeded store in a fresh database file and returns it
// with the file's path. The store is closed when the test ends.
func openSeeded(t *testing.T) (*domain.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "devices.db")
	store, err := domain.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := store.Seed(context.Background()); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	return store, path
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
