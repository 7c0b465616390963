package replica_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// replica.AuditSink keeps the surface.AuditSink contract: the
// conformance kit runs against it on a real Postgres, which the kit
// stalls by locking the audit table from another connection. It uses
// the package's exported API and the table Migrate creates only.
func TestAuditSinkConformance(t *testing.T) {
	surfacetest.TestAuditSink(t, func(t testing.TB) surfacetest.AuditSinkUnderTest {
		ctx := context.Background()
		url := pg.Database(t)
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if err := replica.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
		sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "kit", QueueSize: 64,
			Timeout: time.Second, CloseTimeout: 30 * time.Second})
		t.Cleanup(func() { _ = sink.Close() })
		return surfacetest.AuditSinkUnderTest{
			Sink:    sink,
			Records: func() []surface.AuditEvent { return kitAuditRows(t, url) },
			Flush:   func() { _ = sink.Close() },
			Lost:    func() uint64 { return sink.Stats().Dropped },
			Stall:   func() func() { return kitLockAudit(t, url) },
		}
	})
}

// kitAuditRows reads the audit table back as records, on a connection of
// its own.
func kitAuditRows(t testing.TB, url string) []surface.AuditEvent {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("read the audit table: %v", err)
		return nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT type, at, capability_id, registration_id, invocation_id, consumer_id,
		status, code, duration_ms FROM agentsurface_audit ORDER BY id`)
	if err != nil {
		t.Errorf("read the audit table: %v", err)
		return nil
	}
	defer rows.Close()
	var out []surface.AuditEvent
	for rows.Next() {
		var e surface.AuditEvent
		var capID, regID, invID, consumer, status, code *string
		if err := rows.Scan(&e.Type, &e.At, &capID, &regID, &invID, &consumer, &status, &code, &e.DurationMs); err != nil {
			t.Errorf("read the audit table: %v", err)
			return nil
		}
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		e.CapabilityID, e.RegistrationID, e.InvocationID, e.ConsumerID = str(capID), str(regID), str(invID), str(consumer)
		e.Status, e.Code = surface.ResultStatus(str(status)), surface.Code(str(code))
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Errorf("read the audit table: %v", err)
	}
	return out
}

// kitLockAudit locks the audit table from a connection of its own, so
// that every write waits, until release rolls the lock back.
func kitLockAudit(t testing.TB, url string) (release func()) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("stall: %v", err)
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, "LOCK TABLE agentsurface_audit IN ACCESS EXCLUSIVE MODE")
	}
	if err != nil {
		conn.Close(ctx)
		t.Fatalf("stall: %v", err)
	}
	return sync.OnceFunc(func() {
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	})
}
