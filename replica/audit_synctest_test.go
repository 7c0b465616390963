package replica_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/jackc/pgx/v5/pgxpool"
)

// With Postgres unreachable (a port nobody listens on: every write fails
// at once), the sink's timing runs on virtual time: drops are logged at
// once, then at most every ten seconds with the count since, and Close
// gives up exactly at CloseTimeout.
func TestAuditDropLogAndCloseTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		logs := new(syncWriter)
		sink := replica.NewAuditSink(pool, &replica.AuditOptions{QueueSize: 3, CloseTimeout: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		record := func() error {
			return sink.Record(context.Background(), surface.AuditEvent{Type: surface.AuditRegistration})
		}
		drops := func() int { return strings.Count(logs.String(), "audit records dropped") }
		for range 3 {
			if err := record(); err != nil {
				t.Fatal(err)
			}
		}
		if err := record(); !errors.Is(err, surface.ErrAuditDropped) || drops() != 1 {
			t.Fatalf("the first drop: %v, %d log lines", err, drops())
		}
		time.Sleep(9 * time.Second)
		for range 4 {
			_ = record()
		}
		if drops() != 1 {
			t.Fatalf("drops within ten seconds logged again:\n%s", logs)
		}
		time.Sleep(time.Second)
		_ = record()
		if drops() != 2 || !strings.Contains(logs.String(), "dropped=5 dropped_total=6") {
			t.Fatalf("the drops since, ten seconds on:\n%s", logs)
		}
		start := time.Now()
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Fatalf("Close took %v, want the CloseTimeout, 5s", took)
		}
		if st := sink.Stats(); st.Dropped != 9 || st.Queued != 0 || st.Written != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A durable Record with Postgres unreachable returns exactly at Timeout
// (virtual time), its record counted as dropped; records that wait
// together all get their answer by their own deadline. (Issue 38.4.)
func TestDurableAuditWaitsExactlyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		sink := replica.NewAuditSink(pool, &replica.AuditOptions{Durable: true, Timeout: 3 * time.Second, CloseTimeout: time.Second})
		start := time.Now()
		done := make(chan time.Duration, 3)
		for i := range 3 {
			go func() {
				time.Sleep(time.Duration(i) * time.Second)
				err := sink.Record(context.Background(), surface.AuditEvent{Type: surface.AuditRegistration})
				if !errors.Is(err, surface.ErrAuditDropped) {
					t.Errorf("Record %d: %v", i, err)
				}
				done <- time.Since(start) - time.Duration(i)*time.Second
			}()
		}
		for range 3 {
			if took := <-done; took != 3*time.Second {
				t.Errorf("a durable Record returned after %v, want the Timeout, 3s", took)
			}
		}
		if st := sink.Stats(); st.Dropped != 3 || st.Written != 0 || st.Queued != 0 {
			t.Fatalf("stats %+v", st)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
