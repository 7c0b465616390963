package domain_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
)

var bg = context.Background()

func requireUnchanged(t *testing.T, before, after dbState) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the database changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestOpenMigratesIdempotently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devices.db")
	for i := range 3 {
		store, err := domain.Open(bg, path)
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		if err := store.Seed(bg); err != nil {
			t.Fatalf("Seed #%d: %v", i, err)
		}
		if err := store.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i, err)
		}
		if err := store.Close(); err != nil { // idempotent
			t.Fatalf("second Close #%d: %v", i, err)
		}
	}
	db := rawDB(t, path)
	var version int
	var mode string
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != 3 {
		t.Fatalf("user_version %d, %v", version, err)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if !slices.Equal(tables, []string{"audit_log", "devices", "idempotency_keys"}) {
		t.Fatalf("tables %v", tables)
	}
	if n := len(statusOf(t, db)); n != 12 {
		t.Fatalf("%d devices after seeding three times, want 12", n)
	}
}

func TestOpenRejects(t *testing.T) {
	for _, path := range []string{"", "devices.db?mode=ro"} {
		if _, err := domain.Open(bg, path); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", path, err)
		}
	}
	// A database from a newer program is refused, not downgraded.
	path := filepath.Join(t.TempDir(), "devices.db")
	store, err := domain.Open(bg, path)
	if err != nil {
		t.Fatal(err)
	}
	_ = store.Close()
	db, err := sqlOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if s, err := domain.Open(bg, path); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

// A version 1 database (before idempotency keys) is migrated in place,
// its data kept.
func TestOpenUpgradesVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	store, err := domain.Open(bg, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Seed(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Disable(bg, operator, []string{"d1"}, "before"); err != nil {
		t.Fatal(err)
	}
	_ = store.Close()
	// Make it version 1: without idempotency keys.
	db, err := sqlOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE idempotency_keys; PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	upgraded := mustOpen(t, func() (*domain.Store, error) { return domain.Open(bg, path) })
	if v := schemaVersion(t, backends[0], rawDB(t, path)); v != 3 {
		t.Fatalf("version %d", v)
	}
	if h, err := upgraded.History(bg, viewer, "d1", 0); err != nil || len(h) != 1 || h[0].Reason != "before" {
		t.Fatalf("history %+v %v", h, err)
	}
	// The version 2 table of per-user keys is never created on the way.
	if n := count(t, rawDB(t, path), `SELECT count(*) FROM sqlite_schema WHERE name = 'invocation_keys'`); n != 0 {
		t.Fatal("a version 1 database was given the version 2 key table")
	}
	if res, err := upgraded.DisableOnce(bg, operator, agentA("k"), []string{"d2"}, "after"); err != nil || res.Disabled != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

// On PostgreSQL the schema version is in devices_schema; opening again
// migrates nothing, and a newer schema is refused.
func TestOpenPostgres(t *testing.T) {
	db := backends[1].newDB(t)
	for i := range 3 {
		store, err := db.openStore()
		if err != nil {
			t.Fatalf("open #%d: %v", i, err)
		}
		if err := store.Seed(bg); err != nil {
			t.Fatalf("Seed #%d: %v", i, err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if v := schemaVersion(t, backends[1], db.raw); v != 3 {
		t.Fatalf("version %d", v)
	}
	var tables []string
	rows, err := db.raw.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if !slices.Equal(tables, []string{"audit_log", "devices", "devices_schema", "idempotency_keys"}) {
		t.Fatalf("tables %v", tables)
	}
	if n := len(statusOf(t, db.raw)); n != 12 {
		t.Fatalf("%d devices", n)
	}
	if _, err := db.raw.Exec(`UPDATE devices_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if s, err := db.openStore(); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestOpenInMemory(t *testing.T) {
	store, err := domain.Open(bg, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Seed(bg); err != nil {
		t.Fatal(err)
	}
	devices, err := store.List(bg, viewer, domain.Filter{})
	if err != nil || len(devices) != 12 {
		t.Fatalf("%d devices, %v", len(devices), err)
	}
}

func TestSeed(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, tdb := b.seeded(t)
		db := tdb.raw
		status := statusOf(t, db)
		if len(status) != 12 {
			t.Fatalf("%d devices", len(status))
		}
		for i := 1; i <= 12; i++ {
			if _, ok := status[fmt.Sprintf("d%d", i)]; !ok {
				t.Errorf("d%d missing", i)
			}
		}
		d, err := store.Get(bg, viewer, "d1")
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != "edge-gw-ams-01" || d.Status != domain.StatusOnline || d.Site != "Amsterdam" || time.Since(d.UpdatedAt) > time.Hour {
			t.Fatalf("%+v", d)
		}
		if len(auditLog(t, db)) != 0 {
			t.Fatal("seeding wrote audit rows")
		}
	})
}

func ids(devices []domain.Device) []string {
	out := make([]string, len(devices))
	for i, d := range devices {
		out[i] = d.ID
	}
	return out
}

func TestListFilters(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, _ := b.seeded(t)
		cases := []struct {
			name   string
			filter domain.Filter
			want   []string
		}{
			{"all", domain.Filter{}, []string{"d9", "d4", "d1", "d2", "d5", "d6", "d8", "d10", "d12", "d7", "d11", "d3"}},
			{"status", domain.Filter{Status: domain.StatusOffline}, []string{"d9", "d4", "d6", "d10"}},
			{"site", domain.Filter{Site: "frankfurt"}, []string{"d5", "d6", "d7"}},
			{"query name", domain.Filter{Query: "EDGE-GW"}, []string{"d1", "d2", "d5", "d6", "d8"}},
			{"query id", domain.Filter{Query: "d1"}, []string{"d1", "d10", "d12", "d11"}},
			{"combined", domain.Filter{Status: domain.StatusOnline, Site: "Amsterdam", Query: "gw"}, []string{"d1", "d2"}},
			{"wildcards are literal", domain.Filter{Query: "%"}, []string{}},
			{"underscore is literal", domain.Filter{Query: "_"}, []string{}},
			{"no match", domain.Filter{Site: "Paris"}, []string{}},
		}
		for _, c := range cases {
			got, err := store.List(bg, viewer, c.filter)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !slices.Equal(ids(got), c.want) {
				t.Errorf("%s: %v, want %v", c.name, ids(got), c.want)
			}
			// Browse reads the same devices, and the sites of all of them,
			// whatever the filter.
			v, err := store.Browse(bg, viewer, c.filter)
			if err != nil || !slices.Equal(ids(v.Devices), c.want) || !slices.Equal(v.Sites, []string{"Amsterdam", "Berlin", "Frankfurt", "London"}) {
				t.Errorf("Browse %s: %v %v %v", c.name, ids(v.Devices), v.Sites, err)
			}
		}
		if _, err := store.Browse(bg, nobody, domain.Filter{}); !errors.Is(err, domain.ErrForbidden) {
			t.Errorf("Browse as nobody: %v, want ErrForbidden", err)
		}
		if _, err := store.Browse(bg, viewer, domain.Filter{Status: "broken"}); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("Browse with a bad status: %v", err)
		}
		var bad *domain.InvalidError
		_, err := store.List(bg, viewer, domain.Filter{Status: "broken"})
		if !errors.Is(err, domain.ErrInvalid) || !errors.As(err, &bad) || bad.Field != "status" {
			t.Fatalf("bad status: %v", err)
		}
		_, err = store.List(bg, viewer, domain.Filter{Query: strings.Repeat("x", domain.MaxQueryLength+1)})
		if !errors.As(err, &bad) || bad.Field != "query" {
			t.Fatalf("long query: %v", err)
		}
		for _, u := range []domain.User{nobody, {Roles: []string{domain.RoleAdmin}}, {ID: "x", Roles: []string{"guest"}}} {
			if _, err := store.List(bg, u, domain.Filter{}); !errors.Is(err, domain.ErrForbidden) {
				t.Errorf("List as %+v: %v, want ErrForbidden", u, err)
			}
		}
	})
}

func TestGet(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, _ := b.seeded(t)
		if d, err := store.Get(bg, operator, "d11"); err != nil || d.Status != domain.StatusDisabled {
			t.Fatalf("%+v %v", d, err)
		}
		_, err := store.Get(bg, viewer, "d99")
		var nf *domain.NotFoundError
		if !errors.Is(err, domain.ErrNotFound) || !errors.As(err, &nf) || !slices.Equal(nf.IDs, []string{"d99"}) {
			t.Fatalf("%v", err)
		}
		if _, err := store.Get(bg, nobody, "d1"); !errors.Is(err, domain.ErrForbidden) {
			t.Fatal(err)
		}
	})
}

func TestDisablePermissions(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		cases := []struct {
			user domain.User
			ok   bool
		}{
			{viewer, false},
			{operator, true},
			{admin, true},
			{nobody, false},
			{domain.User{Roles: []string{domain.RoleOperator}}, false}, // no id: no permissions
			{domain.User{ID: "x", Roles: []string{"superuser"}}, false},
			{domain.User{ID: "x", Roles: []string{domain.RoleViewer, domain.RoleOperator}}, true},
		}
		for _, c := range cases {
			store, tdb := b.seeded(t)
			db := tdb.raw
			before := stateOf(t, db)
			res, err := store.Disable(bg, c.user, []string{"d1", "d2"}, "maintenance")
			if c.ok {
				if err != nil || res.Disabled != 2 {
					t.Errorf("%+v: %+v %v", c.user, res, err)
				}
				continue
			}
			if !errors.Is(err, domain.ErrForbidden) || res.Disabled != 0 {
				t.Errorf("%+v: %+v %v, want ErrForbidden", c.user, res, err)
			}
			requireUnchanged(t, before, stateOf(t, db))
			// Authority is checked before the arguments: no oracle for ids.
			if _, err := store.Disable(bg, c.user, []string{"d99"}, ""); !errors.Is(err, domain.ErrForbidden) {
				t.Errorf("%+v with bad arguments: %v, want ErrForbidden", c.user, err)
			}
		}
	})
}

func TestDisableUnknownIDChangesNothing(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, tdb := b.seeded(t)
		db := tdb.raw
		before := stateOf(t, db)
		res, err := store.Disable(bg, operator, []string{"d5", "d99", "d7", "d98"}, "maintenance")
		var nf *domain.NotFoundError
		if !errors.Is(err, domain.ErrNotFound) || !errors.As(err, &nf) || !slices.Equal(nf.IDs, []string{"d99", "d98"}) || res.Disabled != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		requireUnchanged(t, before, stateOf(t, db))
	})
}

func TestDisableInvalid(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, tdb := b.seeded(t)
		db := tdb.raw
		before := stateOf(t, db)
		many := make([]string, domain.MaxIDs+1)
		for i := range many {
			many[i] = fmt.Sprintf("d%d", i)
		}
		cases := []struct {
			ids    []string
			reason string
			field  string
		}{
			{nil, "r", "ids"},
			{[]string{}, "r", "ids"},
			{many, "r", "ids"},
			{[]string{""}, "r", "ids"},
			{[]string{strings.Repeat("d", domain.MaxIDLength+1)}, "r", "ids"},
			{[]string{"d1"}, "", "reason"},
			{[]string{"d1"}, " \t\n", "reason"},
			{[]string{"d1"}, strings.Repeat("é", domain.MaxReasonLength+1), "reason"},
		}
		for _, c := range cases {
			_, err := store.Disable(bg, operator, c.ids, c.reason)
			var bad *domain.InvalidError
			if !errors.Is(err, domain.ErrInvalid) || !errors.As(err, &bad) || bad.Field != c.field {
				t.Errorf("%d ids, reason %q: %v, want invalid %s", len(c.ids), c.reason, err, c.field)
			}
		}
		requireUnchanged(t, before, stateOf(t, db))
		// The longest reason is fine.
		if _, err := store.Disable(bg, operator, []string{"d1"}, strings.Repeat("é", domain.MaxReasonLength)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDisableWritesAudit(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, tdb := b.seeded(t)
		db := tdb.raw
		start := time.Now().UTC().Add(-time.Second)
		// d11 is already disabled: not counted, not audited; duplicates count once.
		res, err := store.Disable(bg, operator, []string{"d4", "d1", "d11", "d4"}, "  firmware recall  ")
		if err != nil || res.Disabled != 2 {
			t.Fatalf("%+v %v", res, err)
		}
		status := statusOf(t, db)
		if status["d1"] != "disabled" || status["d4"] != "disabled" || status["d11"] != "disabled" || status["d2"] != "online" {
			t.Fatalf("%v", status)
		}
		log := auditLog(t, db)
		want := []auditRow{
			{User: "olivia", Action: "disable", Device: "d4", From: "offline", To: "disabled", Reason: "firmware recall"},
			{User: "olivia", Action: "disable", Device: "d1", From: "online", To: "disabled", Reason: "firmware recall"},
		}
		if len(log) != len(want) {
			t.Fatalf("%+v", log)
		}
		for i := range log {
			at, err := time.Parse(time.RFC3339Nano, log[i].At)
			if err != nil || at.Before(start) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("row %d: at %q %v", i, log[i].At, err)
			}
			log[i].At = ""
			if log[i] != want[i] {
				t.Errorf("row %d: %+v, want %+v", i, log[i], want[i])
			}
		}
		d, err := store.Get(bg, viewer, "d1")
		if err != nil || d.UpdatedAt.Before(start) {
			t.Fatalf("updatedAt not bumped: %+v %v", d, err)
		}
		// Disabling again changes nothing.
		if res, err := store.Disable(bg, admin, []string{"d1"}, "again"); err != nil || res.Disabled != 0 || len(auditLog(t, db)) != 2 {
			t.Fatalf("%+v %v", res, err)
		}
	})
}

func TestEnable(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, tdb := b.seeded(t)
		db := tdb.raw
		if _, err := store.Enable(bg, viewer, []string{"d11"}, "fixed"); !errors.Is(err, domain.ErrForbidden) {
			t.Fatal(err)
		}
		if _, err := store.Enable(bg, operator, []string{"d11", "d0"}, "fixed"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatal(err)
		}
		res, err := store.Enable(bg, operator, []string{"d11", "d1"}, "fixed")
		if err != nil || res.Enabled != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		if s := statusOf(t, db); s["d11"] != "offline" || s["d1"] != "online" {
			t.Fatalf("%v", s)
		}
		log := auditLog(t, db)
		if len(log) != 1 || log[0].Action != "enable" || log[0].Device != "d11" || log[0].From != "disabled" || log[0].To != "offline" || log[0].User != "olivia" {
			t.Fatalf("%+v", log)
		}
	})
}

// Concurrent writers serialise on the write lock (busy timeout, BEGIN
// IMMEDIATE) instead of failing: each device is disabled exactly once.
func TestConcurrentDisable(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, tdb := b.seeded(t)
		db := tdb.raw
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for i := range 8 {
			wg.Go(func() {
				set := []string{"d1", "d2", "d3", fmt.Sprintf("d%d", 4+i%8)}
				res, err := store.Disable(bg, operator, set, fmt.Sprintf("worker %d", i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += res.Disabled
				mu.Unlock()
			})
			wg.Go(func() {
				if _, err := store.List(bg, viewer, domain.Filter{}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// d1–d11 disabled (d11 was already), d12 untouched.
		changed := len(auditLog(t, db))
		if total != changed || changed != 10 {
			t.Fatalf("counted %d, audited %d, want 10", total, changed)
		}
	})
}

func TestCancelledContext(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, tdb := b.seeded(t)
		db := tdb.raw
		before := stateOf(t, db)
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if _, err := store.Disable(ctx, operator, []string{"d1"}, "r"); err == nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("%v", err)
		}
		requireUnchanged(t, before, stateOf(t, db))
	})
}

func TestUserFromHost(t *testing.T) {
	op := operator
	cases := []struct {
		host map[string]any
		ok   bool
	}{
		{map[string]any{"user": operator}, true},
		{map[string]any{"user": &op}, true},
		{map[string]any{"user": (*domain.User)(nil)}, false},
		{map[string]any{"user": domain.User{Roles: []string{"admin"}}}, false},
		{map[string]any{"user": map[string]any{"ID": "olivia"}}, false},
		{map[string]any{"user": "olivia"}, false},
		{map[string]any{}, false},
		{nil, false},
	}
	for i, c := range cases {
		u, ok := domain.UserFromHost(c.host)
		if ok != c.ok || (ok && u.ID != "olivia") {
			t.Errorf("case %d: %+v %v", i, u, ok)
		}
	}
	// The returned roles are a copy.
	u, _ := domain.UserFromHost(map[string]any{"user": &op})
	u.Roles[0] = domain.RoleAdmin
	if op.Roles[0] != domain.RoleOperator {
		t.Fatal("UserFromHost aliases the host's roles")
	}
	if !domain.HostCan(map[string]any{"user": operator}, "devices:disable") || domain.HostCan(map[string]any{"user": viewer}, "devices:disable") ||
		domain.HostCan(nil, "devices:read") || domain.HostCan(map[string]any{"user": admin}, "devices:delete") {
		t.Fatal("HostCan")
	}
}

// History lists a device's audit rows newest first, within the limit, for
// viewers and up.
func TestHistory(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, _ := b.seeded(t)
		if _, err := store.Disable(bg, operator, []string{"d4", "d5"}, "recall"); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Enable(bg, admin, []string{"d4"}, "fixed"); err != nil {
			t.Fatal(err)
		}
		h, err := store.History(bg, viewer, "d4", 0)
		if err != nil || len(h) != 2 {
			t.Fatalf("%+v %v", h, err)
		}
		if h[0].Action != "enable" || h[0].UserID != admin.ID || h[0].From != domain.StatusDisabled || h[0].To != domain.StatusOffline || h[0].Reason != "fixed" {
			t.Fatalf("newest %+v", h[0])
		}
		if h[1].Action != "disable" || h[1].UserID != operator.ID || h[1].DeviceID != "d4" || h[1].At.IsZero() {
			t.Fatalf("oldest %+v", h[1])
		}
		if h, err := store.History(bg, viewer, "d4", 1); err != nil || len(h) != 1 || h[0].Action != "enable" {
			t.Fatalf("limit 1: %+v %v", h, err)
		}
		if h, err := store.History(bg, viewer, "d99", 0); err != nil || len(h) != 0 || h == nil {
			t.Fatalf("unknown id: %+v %v", h, err)
		}
		if _, err := store.History(bg, nobody, "d4", 0); !errors.Is(err, domain.ErrForbidden) {
			t.Fatalf("nobody: %v", err)
		}
	})
}
