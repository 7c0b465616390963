package domain_test

// Idempotency keys belong to the consumer that chose them (AS-IDENT-004):
// consumers choose their ids independently, so one consumer's use of an
// id is never replayed to, refused to or waited for by another, whatever
// the store, backend or replica.

import (
	"context"
	"database/sql"
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
	"github.com/agentsurface/agentsurface/surface"
	"pgregory.net/rapid"
)

// The finding, on the store: agent A (session 1) disables d5 with id X
// and enables it again; agent B (session 2, same user) disables d5 with
// id X, through another replica. B's call executes: d5 is disabled and
// B's answer says what B's call did, never A's recorded result. A third
// agent's X for another request is neither a conflict nor a replay. A's
// own retry of X still replays A's result, and A's X for another request
// is still A's conflict. AS-IDENT-004.
func TestKeyOfAnotherConsumerExecutes(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		first, db := b.seeded(t)
		replica := db.open(t)
		agentC := func(id string) domain.Key { return domain.Key{Consumer: "session s3 mcp-bridge:agent", ID: id} }

		if res, err := first.DisableOnce(bg, operator, agentA("X"), []string{"d5"}, "maintenance"); err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("A's disable: %+v %v", res, err)
		}
		if res, err := first.EnableOnce(bg, operator, agentA("Y"), []string{"d5"}, "done"); err != nil || res != (domain.EnableResult{Enabled: 1}) {
			t.Fatalf("A's enable: %+v %v", res, err)
		}
		res, err := replica.DisableOnce(bg, operator, agentB("X"), []string{"d5"}, "maintenance")
		if err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("B's disable with A's id: %+v %v, want executed (disabled 1, not replayed)", res, err)
		}
		if s := statusOf(t, db.raw)["d5"]; s != "disabled" {
			t.Fatalf("d5 is %s after B's disable was answered as done", s)
		}
		if n := count(t, db.raw, `SELECT count(*) FROM audit_log WHERE device_id = 'd5' AND action = 'disable'`); n != 2 {
			t.Fatalf("%d disable records of d5, want 2 (A's and B's)", n)
		}
		// C's X for another request: C's own first use, not a conflict.
		res, err = first.DisableOnce(bg, operator, agentC("X"), []string{"d5", "d6"}, "another reason")
		if err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("C's disable with A's and B's id: %+v %v, want executed", res, err)
		}
		// A's and B's retries replay their own results.
		before := stateOf(t, db.raw)
		for name, key := range map[string]domain.Key{"A": agentA("X"), "B": agentB("X")} {
			res, err := replica.DisableOnce(bg, operator, key, []string{"d5"}, "maintenance")
			if err != nil || res != (domain.DisableResult{Disabled: 1, Replayed: true}) {
				t.Fatalf("%s's retry: %+v %v, want its own result replayed", name, res, err)
			}
			if _, err := replica.EnableOnce(bg, operator, key, []string{"d5"}, "maintenance"); !errors.Is(err, domain.ErrKeyReused) {
				t.Fatalf("%s's id for another request: %v, want its own conflict", name, err)
			}
		}
		requireUnchanged(t, before, stateOf(t, db.raw))
	})
}

// On PostgreSQL, a call never waits for another consumer's claim of the
// same id: only the same consumer's concurrent call does (see
// TestKeyWaitsForConcurrentClaim). Waiting would tell the caller that
// someone is using the id. AS-IDENT-004.
func TestKeyOfAnotherConsumerNeverWaits(t *testing.T) {
	store, db := backends[1].seeded(t)
	tx, err := db.raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// A's claim of X, in flight (uncommitted, its row locked).
	if _, err := tx.Exec(`INSERT INTO idempotency_keys (user_id, consumer, invocation_key, action, digest, changed, created_at, expires_at)
		VALUES ($1, encode(sha256(convert_to($2, 'UTF8')), 'hex'), 'X', 'disable', 'another request', 0, '2000-01-01T00:00:00.000Z', '9999-01-01T00:00:00.000Z')`,
		operator.ID, agentA("X").Consumer); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	res, err := store.DisableOnce(ctx, operator, agentB("X"), []string{"d1"}, "r")
	if err != nil || res != (domain.DisableResult{Disabled: 1}) {
		t.Fatalf("B's call while A's claim of the id is in flight: %+v %v, want executed at once", res, err)
	}
}

// The procedures scope the invocation id to the calling consumer:
// by default the registry's consumer key, and with
// ProcedureOptions.Consumer whatever the host says (here: the session,
// as the console does, where every session's agent is named alike). Two
// agents sending the same invocation id both execute; each one's retry
// replays its own output; neither is told of the other's use of the id.
// AS-IDENT-004.
func TestProceduresKeyPerConsumer(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, db := b.seeded(t)
		agent := surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
		bySession := &domain.ProcedureOptions{Consumer: func(call *surface.ProcedureCall) string {
			s, _ := call.Host["session"].(string)
			return s + " " + call.Consumer.Key()
		}}
		cases := []struct {
			name        string
			opts        *domain.ProcedureOptions
			a, b, third surface.Consumer
			host        func(session string) map[string]any
		}{
			{"default scope, three consumers", nil, agent, surface.Consumer{ID: "other", Kind: surface.ConsumerMCPBridge}, surface.Consumer{ID: "third", Kind: surface.ConsumerWebMCP},
				func(string) map[string]any { return map[string]any{"user": operator} }},
			{"session scope, one consumer name", bySession, agent, agent, agent,
				func(s string) map[string]any { return map[string]any{"user": operator, "session": s} }},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				// Two replicas: executors on two Stores of the database.
				x, y := domain.Procedures(store, c.opts), domain.Procedures(db.open(t), c.opts)
				id := fmt.Sprintf("inv-%d", i)
				disable := `{"ids":["d5"],"reason":"r"}`
				if out, err := executeAs(x, c.a, domain.DisablePath, c.host("s1"), disable, id); err != nil || string(out) != `{"disabled":1}` {
					t.Fatalf("A: %s %v", out, err)
				}
				if out, err := executeAs(x, c.a, domain.EnablePath, c.host("s1"), disable, id+"-enable"); err != nil || string(out) != `{"enabled":1}` {
					t.Fatalf("A's enable: %s %v", out, err)
				}
				out, err := executeAs(y, c.b, domain.DisablePath, c.host("s2"), disable, id)
				if err != nil || string(out) != `{"disabled":1}` || statusOf(t, db.raw)["d5"] != "disabled" {
					t.Fatalf("B with A's id: %s %v, d5 %s; want B's disable executed", out, err, statusOf(t, db.raw)["d5"])
				}
				// Another request under the id, by a third agent: executes.
				out, err = executeAs(y, c.third, domain.EnablePath, c.host("s3"), `{"ids":["d5","d6"],"reason":"other"}`, id)
				if err != nil || string(out) != `{"enabled":1}` {
					t.Fatalf("a third agent's other request with the id: %s %v", out, err)
				}
				// B's own retry replays B's output; B's own other request
				// under the id is B's conflict.
				if out, err := executeAs(x, c.b, domain.DisablePath, c.host("s2"), disable, id); err != nil || string(out) != `{"disabled":1}` || statusOf(t, db.raw)["d5"] != "offline" {
					t.Fatalf("B's retry: %s %v, d5 %s", out, err, statusOf(t, db.raw)["d5"])
				}
				_, err = executeAs(x, c.b, domain.EnablePath, c.host("s2"), disable, id)
				requireAgentError(t, err, surface.CodeInvocationConflict)
			})
		}
	})
}

// executeAs runs one procedure call of consumer with invocation id id.
func executeAs(x surface.ProcedureExecutor, consumer surface.Consumer, path string, host map[string]any, input, id string) ([]byte, error) {
	return x.Execute(context.Background(), &surface.ProcedureCall{
		ProcedureID: "domain:" + path, Path: path, Input: []byte(input), InvocationID: id,
		Consumer: consumer, Host: host,
	})
}

// A version 2 database (keys per user, in invocation_keys) is upgraded in
// place to version 3, by several replicas opening it at once: its devices
// and audit log are kept; its invocation_keys table stays, and the claim
// of a replica of the previous release still running during a rolling
// deploy still works on it; none of its keys is ever replayed to a
// consumer, who could not be told whose it was.
func TestOpenUpgradesVersion2(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		db := b.newDB(t)
		store := db.open(t)
		if err := store.Seed(bg); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Disable(bg, operator, []string{"d1"}, "before"); err != nil {
			t.Fatal(err)
		}
		w := writer(t, b, db)
		q := func(query string) string { // the backend's placeholders
			if b.name == "postgres" {
				for i := 1; strings.Contains(query, "?"); i++ {
					query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
				}
			}
			return query
		}
		// Make it version 2, as the previous release left it, with a live
		// key: operator's "k-old" disabled d2.
		text := `TEXT`
		if b.name == "postgres" {
			text = `TEXT COLLATE "C"`
		}
		for _, stmt := range []string{
			`DROP TABLE idempotency_keys`,
			`CREATE TABLE invocation_keys (
				user_id        ` + text + ` NOT NULL,
				invocation_key ` + text + ` NOT NULL,
				action         TEXT NOT NULL CHECK (action IN ('disable', 'enable')),
				digest         TEXT NOT NULL,
				changed        INTEGER NOT NULL,
				created_at     TEXT NOT NULL,
				expires_at     TEXT NOT NULL,
				PRIMARY KEY (user_id, invocation_key)
			)`,
			`CREATE INDEX invocation_keys_expiry ON invocation_keys (expires_at)`,
			`INSERT INTO invocation_keys VALUES ('olivia', 'k-old', 'disable', 'some request', 1, '2000-01-01T00:00:00.000Z', '9999-01-01T00:00:00.000Z')`,
		} {
			if _, err := w.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		setVersion(t, b, w, 2)
		before := stateOf(t, db.raw)

		const n = 3
		stores := make([]*domain.Store, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { stores[i], errs[i] = db.openStore() })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("open #%d: %v", i, errs[i])
			}
			t.Cleanup(func() { _ = stores[i].Close() })
		}
		if v := schemaVersion(t, b, db.raw); v != 3 {
			t.Fatalf("version %d, want 3", v)
		}
		requireUnchanged(t, before, stateOf(t, db.raw))
		if n := count(t, db.raw, `SELECT count(*) FROM invocation_keys`); n != 1 {
			t.Fatalf("%d rows in invocation_keys after the upgrade, want its 1", n)
		}
		// A replica of the previous release claims a key as it did.
		var zero int
		err := w.QueryRow(q(`INSERT INTO invocation_keys
				(user_id, invocation_key, action, digest, changed, created_at, expires_at)
			VALUES (?, ?, 'disable', 'd', 0, ?, ?)
			ON CONFLICT (user_id, invocation_key) DO UPDATE SET
				action = excluded.action, digest = excluded.digest, changed = 0,
				created_at = excluded.created_at, expires_at = excluded.expires_at
			WHERE invocation_keys.expires_at <= excluded.created_at
			RETURNING changed`), "olivia", "k-new", "2030-01-01T00:00:00.000Z", "2030-01-02T00:00:00.000Z").Scan(&zero)
		if err != nil {
			t.Fatalf("the previous release's claim on the upgraded database: %v", err)
		}
		// The old key is nobody's: the same id executes.
		res, err := stores[1].DisableOnce(bg, operator, agentA("k-old"), []string{"d2"}, "after")
		if err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("a call with a version 2 key's id: %+v %v, want executed", res, err)
		}
		if res, err := stores[2].DisableOnce(bg, operator, agentA("k-old"), []string{"d2"}, "after"); err != nil || !res.Replayed {
			t.Fatalf("its retry: %+v %v, want replayed", res, err)
		}
		if h, err := stores[0].History(bg, viewer, "d1", 0); err != nil || len(h) != 1 || h[0].Reason != "before" {
			t.Fatalf("history %+v %v", h, err)
		}
	})
}

// writer returns a handle that may write to db, bypassing the store.
func writer(t *testing.T, b backend, db *testDB) *sql.DB {
	t.Helper()
	if b.name == "postgres" {
		return db.raw
	}
	var path string
	if err := db.raw.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	w, err := sqlOpen(path)
	if err != nil {
		t.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// setVersion sets the schema version as b keeps it.
func setVersion(t *testing.T, b backend, w *sql.DB, v int) {
	t.Helper()
	q := fmt.Sprintf(`PRAGMA user_version = %d`, v)
	if b.name == "postgres" {
		q = fmt.Sprintf(`UPDATE devices_schema SET version = %d`, v)
	}
	if _, err := w.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// keyOp is one keyed call of the property test.
type keyOp struct {
	user     domain.User
	consumer string
	id       string
	enable   bool
	ids      []string
	reason   string
}

// modelKey is a key of the model: user, consumer and id.
type modelKey struct{ user, consumer, id string }

// modelRecord is what the model remembers of a key.
type modelRecord struct {
	enable  bool
	ids     string // sorted, without duplicates
	reason  string
	changed int
}

// For random sequences of keyed calls by several consumers of two users
// choosing ids from a small common set, the store executes a call exactly
// when its (user, consumer, id) is new, replays only that consumer's own
// recorded result for the same request, refuses only that consumer's
// other request — and answers every call as it would if no other
// consumer had ever used the id: a second database, where each consumer's
// ids are made unique to it, gives the same answers and ends in the same
// state. AS-IDENT-004 (and AS-IDENT-001/002 per consumer).
func TestKeysPerConsumerProperty(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) (*domain.Store, *sql.DB) {
		path := filepath.Join(dir, name)
		s := mustOpen(t, func() (*domain.Store, error) { return domain.Open(bg, path) })
		w, err := sqlOpen(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		return s, w
	}
	shared, sharedDB := open("shared.db")
	apart, apartDB := open("apart.db")
	devices := []string{"d1", "d4", "d11"} // online, offline, disabled when seeded
	seeded := map[string]string{"d1": "online", "d4": "offline", "d11": "disabled"}
	rapid.Check(t, func(rt *rapid.T) {
		for i, db := range []*sql.DB{sharedDB, apartDB} {
			for _, q := range []string{`DELETE FROM audit_log`, `DELETE FROM idempotency_keys`, `DELETE FROM devices`} {
				if _, err := db.Exec(q); err != nil {
					rt.Fatal(err)
				}
			}
			if err := []*domain.Store{shared, apart}[i].Seed(bg); err != nil {
				rt.Fatal(err)
			}
		}
		status := map[string]string{}
		for id, s := range seeded {
			status[id] = s
		}
		keys := map[modelKey]modelRecord{}
		executions := 0
		n := rapid.IntRange(1, 12).Draw(rt, "calls")
		for i := range n {
			op := keyOp{
				user:     rapid.SampledFrom([]domain.User{operator, admin}).Draw(rt, "user"),
				consumer: rapid.SampledFrom([]string{"s1 mcp-bridge:agent", "s2 mcp-bridge:agent", "s1 webmcp:browser"}).Draw(rt, "consumer"),
				id:       rapid.SampledFrom([]string{"X", "Y"}).Draw(rt, "id"),
				enable:   rapid.Bool().Draw(rt, "enable"),
				ids:      rapid.SliceOfN(rapid.SampledFrom(devices), 1, 4).Draw(rt, "ids"),
				reason:   rapid.SampledFrom([]string{"r", " r ", "s"}).Draw(rt, "reason"),
			}
			// The model.
			unique := slices.Compact(slices.Sorted(slices.Values(op.ids)))
			req := modelRecord{enable: op.enable, ids: strings.Join(unique, ","), reason: strings.TrimSpace(op.reason)}
			mk := modelKey{op.user.ID, op.consumer, op.id}
			var want outcome
			switch rec, seen := keys[mk]; {
			case !seen:
				changed := 0
				for _, d := range unique {
					switch {
					case op.enable && status[d] == "disabled":
						status[d] = "offline"
						changed++
					case !op.enable && status[d] != "disabled":
						status[d] = "disabled"
						changed++
					}
				}
				req.changed = changed
				keys[mk] = req
				executions += changed
				want = transitionOutcome(op.enable, changed, false, nil)
			case rec.enable == req.enable && rec.ids == req.ids && rec.reason == req.reason:
				want = transitionOutcome(op.enable, rec.changed, true, nil)
			default:
				want = transitionOutcome(op.enable, 0, false, domain.ErrKeyReused)
			}
			got := call(shared, op, domain.Key{Consumer: op.consumer, ID: op.id})
			alone := call(apart, op, domain.Key{Consumer: op.consumer, ID: op.consumer + "/" + op.id})
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("call %d %+v: got %+v, want %+v", i, op, got, want)
			}
			if !reflect.DeepEqual(got, alone) {
				rt.Fatalf("call %d %+v: answered %+v, but %+v where no other consumer used the id", i, op, got, alone)
			}
		}
		// The answers said what changed; the databases agree with them.
		if got := pick(statusOf(t, sharedDB), devices); !reflect.DeepEqual(got, status) {
			rt.Fatalf("statuses %v, want %v", got, status)
		}
		if got := count(t, sharedDB, `SELECT count(*) FROM audit_log`); got != executions {
			rt.Fatalf("%d audit rows, want %d", got, executions)
		}
		if a, b := stateOf(t, sharedDB), stateOf(t, apartDB); !reflect.DeepEqual(a.status, b.status) || len(a.audit) != len(b.audit) {
			rt.Fatalf("the databases differ:\nshared %+v\napart  %+v", a, b)
		}
	})
}

// call runs op on s with key.
func call(s *domain.Store, op keyOp, key domain.Key) outcome {
	if op.enable {
		r, err := s.EnableOnce(bg, op.user, key, op.ids, op.reason)
		return transitionOutcome(true, r.Enabled, r.Replayed, err)
	}
	r, err := s.DisableOnce(bg, op.user, key, op.ids, op.reason)
	return transitionOutcome(false, r.Disabled, r.Replayed, err)
}

// transitionOutcome is the comparable outcome of a keyed call: its result,
// or which sentinel its error matches.
func transitionOutcome(enable bool, changed int, replayed bool, err error) outcome {
	switch {
	case errors.Is(err, domain.ErrKeyReused):
		return outcome{Err: "key reused"}
	case err != nil:
		return outcome{Err: err.Error()}
	case enable:
		return outcome{Value: domain.EnableResult{Enabled: changed, Replayed: replayed}}
	}
	return outcome{Value: domain.DisableResult{Disabled: changed, Replayed: replayed}}
}

// pick returns the entries of m at keys.
func pick(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}
