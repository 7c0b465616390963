package domain_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/examples/devices/domain/pgdomain"
	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"
)

// extraDevices are added to the seeded ones in TestBackendsAgree: mixed
// case, non-ASCII letters and LIKE wildcards in names, ids and sites.
var extraDevices = [][3]string{
	{"x1", "Edge-GW-Zed", "Amsterdam"},
	{"X2", "édge-gw", "amsterdam"},
	{"x3", "EDGE_gw%", "AMSTERDAM"},
	{"x4", "Ärger", "Köln"},
	{"x5", "zebra", "KÖLN"},
	{"x6", `a\b`, "köln"},
	{"x7", "edgeZ", "Berlin"}, // before "EDGE_gw%" when folded to upper case
}

// Both backends give the same results, errors included, for random
// filters and sequences of transitions, keyed or not, by users of every
// role.
func TestBackendsAgree(t *testing.T) {
	pgDB := icuDB(t, backends[1].newDB(t)) // skips without PostgreSQL
	path := filepath.Join(t.TempDir(), "devices.db")
	lite, err := sqlOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	stores := []*domain.Store{
		mustOpen(t, func() (*domain.Store, error) { return domain.Open(bg, path) }),
		pgDB.open(t),
	}
	raws := []*sql.DB{lite, pgDB.raw}
	c := &clock{}
	for _, s := range stores {
		domain.SetClock(s, c.now)
	}
	ids := []string{"d1", "d2", "d4", "d11", "d12", "x1", "X2", "x2", "x6", "D1", "d99", ""}
	queryRunes := []rune("aAeEéÉgGwWdDxX1-_%\\ \x00")
	rapid.Check(t, func(rt *rapid.T) {
		c.set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		for i, db := range raws {
			for _, q := range []string{`DELETE FROM audit_log`, `DELETE FROM idempotency_keys`, `DELETE FROM devices`} {
				if _, err := db.Exec(q); err != nil {
					rt.Fatal(err)
				}
			}
			if err := stores[i].Seed(bg); err != nil {
				rt.Fatal(err)
			}
			for _, d := range extraDevices {
				q := fmt.Sprintf(`INSERT INTO devices (id, name, status, site, updated_at) VALUES ('%s', '%s', 'online', '%s', '2029-12-31T00:00:00.000Z')`, d[0], d[1], d[2])
				if _, err := db.Exec(q); err != nil {
					rt.Fatal(err)
				}
			}
		}
		users := []domain.User{viewer, operator, admin}
		n := rapid.IntRange(1, 12).Draw(rt, "ops")
		for range n {
			c.set(c.now().Add(time.Minute))
			var op func(s *domain.Store) any
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				f := domain.Filter{
					Status: domain.Status(rapid.SampledFrom([]string{"", "online", "offline", "disabled", "Online"}).Draw(rt, "status")),
					Site:   rapid.SampledFrom([]string{"", "amsterdam", "AMSTERDAM", "Köln", "KÖLN", "köln", "Berlin", "x\x00"}).Draw(rt, "site"),
					Query:  rapid.StringOfN(rapid.SampledFrom(queryRunes), 0, 3, -1).Draw(rt, "query"),
				}
				op = func(s *domain.Store) any { v, err := s.Browse(bg, viewer, f); return result(v, err) }
			case 1:
				u := rapid.SampledFrom(users).Draw(rt, "user")
				set := rapid.SliceOfN(rapid.SampledFrom(ids), 0, 4).Draw(rt, "ids")
				reason := rapid.SampledFrom([]string{"r", " r ", "", "x\x00", "s"}).Draw(rt, "reason")
				key := domain.Key{
					Consumer: rapid.SampledFrom([]string{"", "agent-a", "agent-b"}).Draw(rt, "consumer"),
					ID:       rapid.SampledFrom([]string{"", "k1", "k2"}).Draw(rt, "key"),
				}
				if rapid.Bool().Draw(rt, "disable") {
					op = func(s *domain.Store) any { r, err := s.DisableOnce(bg, u, key, set, reason); return result(r, err) }
				} else {
					op = func(s *domain.Store) any { r, err := s.EnableOnce(bg, u, key, set, reason); return result(r, err) }
				}
			case 2:
				id := rapid.SampledFrom(ids).Draw(rt, "id")
				limit := rapid.IntRange(0, 3).Draw(rt, "limit")
				op = func(s *domain.Store) any { h, err := s.History(bg, viewer, id, limit); return result(h, err) }
			default:
				id := rapid.SampledFrom(append(ids, "a\x00")).Draw(rt, "id")
				op = func(s *domain.Store) any { d, err := s.Get(bg, viewer, id); return result(d, err) }
			}
			a, b := op(stores[0]), op(stores[1])
			if !reflect.DeepEqual(a, b) {
				rt.Fatalf("the backends disagree:\nsqlite   %+v\npostgres %+v", a, b)
			}
		}
		if a, b := stateOf(t, raws[0]), stateOf(t, raws[1]); !reflect.DeepEqual(a, b) {
			rt.Fatalf("the databases differ:\nsqlite   %+v\npostgres %+v", a, b)
		}
	})
}

// outcome is a result and its error text, compared across backends.
type outcome struct {
	Value any
	Err   string
}

func result(v any, err error) outcome {
	o := outcome{Value: v}
	if err != nil {
		o.Err = err.Error()
		o.Value = nil
		if strings.Contains(o.Err, "SQLSTATE") || strings.Contains(o.Err, "SQL logic") {
			o.Err = "database error: " + o.Err
		}
	}
	return o
}

// icuDB creates a database beside db whose default collation is ICU's
// en-US, which orders and compares text unlike the C locale of the test
// server (it ignores punctuation at first, folds accents, …): the store's
// results must not depend on it.
func icuDB(t *testing.T, db *testDB) *testDB {
	t.Helper()
	cfg, err := pgx.ParseConfig(db.url)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.Database + "_icu"
	if _, err := db.raw.Exec(`CREATE DATABASE ` + name + ` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`); err != nil {
		t.Skipf("no ICU collation: %v", err)
	}
	url := strings.Replace(db.url, cfg.Database, name, 1)
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = raw.Close()
		if _, err := db.raw.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	var collation string
	if err := raw.QueryRow(`SELECT daticulocale FROM pg_database WHERE datname = current_database()`).Scan(&collation); err != nil || collation != "en-US" {
		t.Fatalf("ICU locale %q %v", collation, err)
	}
	return &testDB{openStore: func() (*domain.Store, error) { return pgdomain.Open(bg, url) }, raw: raw, url: url}
}
