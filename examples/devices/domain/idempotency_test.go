package domain_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
)

// agentA and agentB are the keys two consumers (agents) of one user make
// of an id they chose each.
func agentA(id string) domain.Key { return domain.Key{Consumer: "session s1 mcp-bridge:agent", ID: id} }
func agentB(id string) domain.Key { return domain.Key{Consumer: "session s2 mcp-bridge:agent", ID: id} }

// A retried keyed call executes nothing and returns the first call's
// result, on the same Store or another one on the database (a retry that
// reaches another replica): one audit_log row per changed device, ever.
// The domain side of AS-IDENT-001.
func TestDisableOnceRetryReturnsRecordedResult(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		first, db := b.seeded(t)
		replica := db.open(t)
		res, err := first.DisableOnce(bg, operator, agentA("inv-1"), []string{"d4", "d1", "d11"}, "recall")
		if err != nil || res != (domain.DisableResult{Disabled: 2}) {
			t.Fatalf("first call: %+v %v", res, err)
		}
		after := stateOf(t, db.raw)
		if len(after.audit) != 2 {
			t.Fatalf("audit %+v", after.audit)
		}
		// d1 is enabled again meanwhile: a replay must not disable it.
		if _, err := first.Enable(bg, admin, []string{"d1"}, "back"); err != nil {
			t.Fatal(err)
		}
		after = stateOf(t, db.raw)
		retries := []struct {
			store  *domain.Store
			ids    []string
			reason string
		}{
			{first, []string{"d4", "d1", "d11"}, "recall"},
			{replica, []string{"d4", "d1", "d11"}, "recall"},
			// The same request, normalised: order, duplicates, spaces.
			{replica, []string{"d11", "d1", "d4", "d1"}, "  recall\n"},
		}
		for i, r := range retries {
			res, err := r.store.DisableOnce(bg, operator, agentA("inv-1"), r.ids, r.reason)
			if err != nil || res != (domain.DisableResult{Disabled: 2, Replayed: true}) {
				t.Fatalf("retry %d: %+v %v", i, res, err)
			}
		}
		requireUnchanged(t, after, stateOf(t, db.raw))

		// Keys are per user and consumer: another user's call with the
		// consumer's key executes, and so does another consumer's.
		if res, err := replica.DisableOnce(bg, admin, agentA("inv-1"), []string{"d4", "d1", "d11"}, "recall"); err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("other user: %+v %v", res, err)
		}
		if _, err := first.Enable(bg, admin, []string{"d1"}, "back again"); err != nil {
			t.Fatal(err)
		}
		if res, err := replica.DisableOnce(bg, operator, agentB("inv-1"), []string{"d4", "d1", "d11"}, "recall"); err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("other consumer: %+v %v", res, err)
		}
		// EnableOnce deduplicates the same way.
		for i, want := range []domain.EnableResult{{Enabled: 3}, {Enabled: 3, Replayed: true}} {
			res, err := []*domain.Store{first, replica}[i].EnableOnce(bg, operator, agentA("inv-2"), []string{"d1", "d4", "d11", "d2"}, "fixed")
			if err != nil || res != want {
				t.Fatalf("enable #%d: %+v %v, want %+v", i, res, err, want)
			}
		}
		// No key: every call executes.
		for range 2 {
			if _, err := first.Disable(bg, operator, []string{"d2"}, "again"); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(t, db.raw, `SELECT count(*) FROM audit_log WHERE reason = 'again'`); n != 1 {
			t.Fatalf("%d audit rows for the unkeyed disables, want 1 (the second changes nothing)", n)
		}
		if n := count(t, db.raw, `SELECT count(*) FROM idempotency_keys`); n != 4 {
			t.Fatalf("%d keys recorded, want 4", n)
		}
	})
}

// A key used again for another action, other ids or another reason is a
// KeyReusedError and changes nothing; the recorded result stays intact.
// The domain side of AS-IDENT-002 and AS-IDENT-003.
func TestKeyReuseIsRefused(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, db := b.seeded(t)
		if _, err := store.DisableOnce(bg, operator, agentA("k"), []string{"d1"}, "r"); err != nil {
			t.Fatal(err)
		}
		before := stateOf(t, db.raw)
		calls := map[string]func() error{
			"other ids": func() error {
				_, err := store.DisableOnce(bg, operator, agentA("k"), []string{"d1", "d2"}, "r")
				return err
			},
			"other reason": func() error { _, err := store.DisableOnce(bg, operator, agentA("k"), []string{"d1"}, "s"); return err },
			"enable":       func() error { _, err := store.EnableOnce(bg, operator, agentA("k"), []string{"d1"}, "r"); return err },
		}
		for name, call := range calls {
			err := call()
			var reused *domain.KeyReusedError
			if !errors.Is(err, domain.ErrKeyReused) || !errors.As(err, &reused) || reused.Key != agentA("k") || errors.Is(err, domain.ErrInvalid) {
				t.Errorf("%s: %v, want a KeyReusedError", name, err)
			}
		}
		requireUnchanged(t, before, stateOf(t, db.raw))
		if res, err := store.DisableOnce(bg, operator, agentA("k"), []string{"d1"}, "r"); err != nil || !res.Replayed || res.Disabled != 1 {
			t.Fatalf("the original retry after refusals: %+v %v", res, err)
		}
	})
}

// Keys are at most MaxKeyLength bytes of UTF-8 text without NUL; a bad
// key is refused before anything runs.
func TestKeyInvalid(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, db := b.seeded(t)
		before := stateOf(t, db.raw)
		for _, key := range []string{strings.Repeat("k", domain.MaxKeyLength+1), "a\x00b", "\xff"} {
			_, err := store.DisableOnce(bg, operator, agentA(key), []string{"d1"}, "r")
			var bad *domain.InvalidError
			if !errors.As(err, &bad) || bad.Field != "invocationId" {
				t.Errorf("key %q: %v, want invalid invocationId", key, err)
			}
		}
		// An id needs the consumer that chose it.
		_, err := store.DisableOnce(bg, operator, domain.Key{ID: "k"}, []string{"d1"}, "r")
		if bad := (*domain.InvalidError)(nil); !errors.As(err, &bad) || bad.Field != "consumer" {
			t.Errorf("a key without a consumer: %v, want invalid consumer", err)
		}
		// Authority comes first, as for every argument.
		if _, err := store.DisableOnce(bg, viewer, agentA("a\x00b"), []string{"d1"}, "r"); !errors.Is(err, domain.ErrForbidden) {
			t.Errorf("viewer with a bad key: %v", err)
		}
		requireUnchanged(t, before, stateOf(t, db.raw))
		if _, err := store.DisableOnce(bg, operator, agentA(strings.Repeat("é", domain.MaxKeyLength/2)), []string{"d1"}, "r"); err != nil {
			t.Fatalf("the longest key: %v", err)
		}
	})
}

// A failed call records no key: nothing changed, so a retry (even a
// corrected one) executes.
func TestFailedCallRecordsNoKey(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, db := b.seeded(t)
		if _, err := store.DisableOnce(bg, operator, agentA("k"), []string{"d1", "d99"}, "r"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatal(err)
		}
		if n := count(t, db.raw, `SELECT count(*) FROM idempotency_keys`); n != 0 {
			t.Fatalf("%d keys after a failed call", n)
		}
		if res, err := store.DisableOnce(bg, operator, agentA("k"), []string{"d1"}, "r"); err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("%+v %v", res, err)
		}
	})
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// A key is remembered for KeyRetention: then a call with it executes
// again, and keyed calls delete the expired keys. The domain side of
// AS-IDENT-005.
func TestKeyRetention(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		db := b.newDB(t)
		store := db.open(t)
		t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		c := &clock{t: t0}
		domain.SetClock(store, c.now)
		if err := store.Seed(bg); err != nil {
			t.Fatal(err)
		}
		for i, key := range []string{"k1", "k2", "k3"} {
			if _, err := store.DisableOnce(bg, operator, agentA(key), []string{fmt.Sprintf("d%d", i+1)}, "r"); err != nil {
				t.Fatal(err)
			}
		}
		c.set(t0.Add(domain.KeyRetention - time.Millisecond))
		if _, err := store.DisableOnce(bg, operator, agentA("k1"), []string{"d5"}, "r"); !errors.Is(err, domain.ErrKeyReused) {
			t.Fatalf("just before expiry: %v", err)
		}
		if res, err := store.DisableOnce(bg, operator, agentA("k1"), []string{"d1"}, "r"); err != nil || !res.Replayed {
			t.Fatalf("just before expiry: %+v %v", res, err)
		}
		c.set(t0.Add(domain.KeyRetention))
		if res, err := store.DisableOnce(bg, operator, agentA("k1"), []string{"d5"}, "r"); err != nil || res != (domain.DisableResult{Disabled: 1}) {
			t.Fatalf("at expiry: %+v %v", res, err)
		}
		// k2 and k3 expired and were deleted; k1 is the new call's.
		if n := count(t, db.raw, `SELECT count(*) FROM idempotency_keys`); n != 1 {
			t.Fatalf("%d keys, want 1", n)
		}
		if res, err := store.DisableOnce(bg, operator, agentA("k1"), []string{"d5"}, "r"); err != nil || !res.Replayed {
			t.Fatalf("the new call's retry: %+v %v", res, err)
		}
	})
}

// Concurrent calls with one key on two Stores sharing the database (two
// replicas) execute once: the others wait for it and return its result.
// AS-IDENT-001 (join in flight) across processes.
func TestConcurrentDisableOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		_, db := b.seeded(t)
		stores := []*domain.Store{db.open(t), db.open(t)}
		const n = 16
		results := make([]domain.DisableResult, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := stores[i%2].DisableOnce(bg, operator, agentA("inv-race"), []string{"d1", "d2", "d3", "d4", "d5"}, "race")
				if err != nil {
					t.Error(err)
				}
				results[i] = res
			})
		}
		wg.Wait()
		executed := 0
		for i, res := range results {
			if res.Disabled != 5 {
				t.Errorf("call %d: %+v", i, res)
			}
			if !res.Replayed {
				executed++
			}
		}
		if executed != 1 {
			t.Fatalf("%d calls executed, want 1", executed)
		}
		if rows := len(auditLog(t, db.raw)); rows != 5 {
			t.Fatalf("%d audit rows, want 5", rows)
		}
	})
}

// On PostgreSQL a call whose key another transaction is inserting waits
// for it: after a rollback it executes, after a commit it reads the
// committed row (here a different request, so it is refused).
func TestKeyWaitsForConcurrentClaim(t *testing.T) {
	for _, commit := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			store, db := backends[1].seeded(t)
			tx, err := db.raw.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec(`INSERT INTO idempotency_keys (user_id, consumer, invocation_key, action, digest, changed, created_at, expires_at)
				VALUES ($1, encode(sha256(convert_to($2, 'UTF8')), 'hex'), 'k', 'disable', 'another request', 7, '2000-01-01T00:00:00.000Z', '9999-01-01T00:00:00.000Z')`,
				operator.ID, agentA("k").Consumer); err != nil {
				t.Fatal(err)
			}
			type outcome struct {
				res domain.DisableResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := store.DisableOnce(bg, operator, agentA("k"), []string{"d1", "d2"}, "r")
				done <- outcome{res, err}
			}()
			awaitLockWait(t, db.raw, func() bool { return len(done) > 0 })
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			o := <-done
			switch {
			case commit && !errors.Is(o.err, domain.ErrKeyReused):
				t.Fatalf("after the commit: %+v %v, want ErrKeyReused", o.res, o.err)
			case !commit && (o.err != nil || o.res != domain.DisableResult{Disabled: 2}):
				t.Fatalf("after the rollback: %+v %v, want executed", o.res, o.err)
			}
			want := 0
			if !commit {
				want = 2
			}
			if rows := len(auditLog(t, db.raw)); rows != want {
				t.Fatalf("%d audit rows, want %d", rows, want)
			}
		})
	}
}

// Stores opening, migrating and seeding one new database at the same time
// (replicas starting together) all succeed and seed it once.
func TestConcurrentOpenAndSeed(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		db := b.newDB(t)
		const n = 6
		stores := make([]*domain.Store, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				stores[i], errs[i] = db.openStore()
				if errs[i] == nil {
					errs[i] = stores[i].Seed(bg)
				}
			})
		}
		wg.Wait()
		for i := range n {
			if stores[i] != nil {
				if err := stores[i].Close(); err != nil {
					t.Error(err)
				}
			}
			if errs[i] != nil {
				t.Errorf("store %d: %v", i, errs[i])
			}
		}
		if got := len(statusOf(t, db.raw)); got != 12 {
			t.Fatalf("%d devices, want 12", got)
		}
		if v := schemaVersion(t, b, db.raw); v != 3 {
			t.Fatalf("schema version %d", v)
		}
	})
}

// awaitLockWait returns once a session of db's database waits on a lock,
// failing t if returned() reports that the call meant to wait returned, or
// after 10s.
func awaitLockWait(t *testing.T, db *sql.DB, returned func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
		if returned() {
			t.Fatal("the call returned without waiting for the other transaction")
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never waited for the other transaction")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// On PostgreSQL a transition locks the devices it reads: a device another
// transaction is changing is read after that one commits, so its change is
// neither lost nor audited twice.
func TestDisableWaitsForConcurrentWriter(t *testing.T) {
	store, db := backends[1].seeded(t)
	tx, err := db.raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`UPDATE devices SET status = 'disabled' WHERE id = 'd1'`); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res domain.DisableResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := store.Disable(bg, operator, []string{"d1", "d2"}, "r")
		done <- outcome{res, err}
	}()
	awaitLockWait(t, db.raw, func() bool { return len(done) > 0 })
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.res.Disabled != 1 {
		t.Fatalf("%+v %v, want only d2 disabled", o.res, o.err)
	}
	if log := auditLog(t, db.raw); len(log) != 1 || log[0].Device != "d2" {
		t.Fatalf("audit %+v", log)
	}
}
