package replica_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"pgregory.net/rapid"
)

// storable is what the sink stores of s: s, with invalid UTF-8 and NUL
// replaced; NULL for "".
func storable(s string) *string {
	if s == "" {
		return nil
	}
	if !utf8.ValidString(s) || strings.Contains(s, "\x00") {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	return &s
}

func sameText(got, want *string) bool {
	return (got == nil) == (want == nil) && (got == nil || *got == *want)
}

func sameInt(got, want *int64) bool {
	return (got == nil) == (want == nil) && (got == nil || *got == *want)
}

// Every field of every record reaches its column as it was given: any
// text (invalid UTF-8 and NUL made storable, "" as NULL), times to the
// microsecond, numbers present or absent, JSON payloads. The sink writes
// COPY's binary format itself, so this is checked against a real
// PostgreSQL, on random records. (Issue 38.4.)
func TestAuditRowsRoundTripProperty(t *testing.T) {
	pool, _ := migrated(t)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1", Durable: true, Timeout: 30 * time.Second})
	defer sink.Close()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		str := func(label string) string {
			return rapid.OneOf(rapid.Just(""), rapid.String(),
				rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) })).Draw(rt, label)
		}
		num := func(label string) *int64 {
			if !rapid.Bool().Draw(rt, label+"?") {
				return nil
			}
			v := rapid.Int64().Draw(rt, label)
			return &v
		}
		jsonText := rapid.SampledFrom([]string{"", `{}`, `{"ids":["d1","d2"],"n":1.5}`, `"ü\u0000"`, `[1,2,3]`, `null`, `{"deep":{"a":[true,false,null]}}`})
		at := time.UnixMicro(rapid.Int64Range(time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
			time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()).Draw(rt, "at"))
		at = at.Add(time.Duration(rapid.IntRange(0, 999).Draw(rt, "ns")))
		e := surface.AuditEvent{At: at, Type: surface.AuditType(rapid.StringMatching(`[a-z.-]{1,20}`).Draw(rt, "type")),
			CapabilityID: str("capability"), RegistrationID: str("registration"),
			InvocationID: fmt.Sprintf("inv-%d-%s", n, str("invocation")), ConfirmationID: str("confirmation"),
			ConsumerID: str("consumer"), Status: surface.ResultStatus(str("status")), Code: surface.Code(str("code")),
			DurationMs: num("duration"), QueueWaitMs: num("queueWait"), ExecutionMs: num("execution"),
			Actor: str("actor"), Reason: str("reason")}
		if rapid.Bool().Draw(rt, "payload") {
			e.Payload = &surface.AuditPayload{Input: surface.JSONText(jsonText.Draw(rt, "input")), Output: surface.JSONText(jsonText.Draw(rt, "output")),
				Truncated: rapid.Bool().Draw(rt, "truncated")}
		}
		session := str("session")
		if err := sink.For(session).Record(context.Background(), e); err != nil {
			rt.Fatal(err)
		}
		var (
			replicaName, typ                                       string
			sess, capability, registration, confirmation, consumer *string
			status, code, actor, reason, input, output             *string
			gotAt                                                  time.Time
			duration, queueWait, execution                         *int64
			truncated                                              bool
		)
		err := pool.QueryRow(context.Background(), `SELECT replica, session, at, type, capability_id, registration_id,
			confirmation_id, consumer_id, status, code, duration_ms, queue_wait_ms, execution_ms, actor, reason,
			input::text, output::text, truncated FROM agentsurface_audit WHERE invocation_id = $1`, *storable(e.InvocationID)).
			Scan(&replicaName, &sess, &gotAt, &typ, &capability, &registration, &confirmation, &consumer, &status, &code,
				&duration, &queueWait, &execution, &actor, &reason, &input, &output, &truncated)
		if err != nil {
			rt.Fatalf("reading the row back: %v", err)
		}
		var in, out string
		var trunc bool
		if e.Payload != nil {
			in, out, trunc = string(e.Payload.Input), string(e.Payload.Output), e.Payload.Truncated
		}
		for _, c := range []struct {
			name      string
			got, want *string
		}{{"session", sess, storable(session)}, {"capability_id", capability, storable(e.CapabilityID)},
			{"registration_id", registration, storable(e.RegistrationID)}, {"confirmation_id", confirmation, storable(e.ConfirmationID)},
			{"consumer_id", consumer, storable(e.ConsumerID)}, {"status", status, storable(string(e.Status))},
			{"code", code, storable(string(e.Code))}, {"actor", actor, storable(e.Actor)}, {"reason", reason, storable(e.Reason)},
			{"input", input, storable(in)}, {"output", output, storable(out)}} {
			if !sameText(c.got, c.want) {
				rt.Fatalf("%s: got %v, want %v", c.name, deref(c.got), deref(c.want))
			}
		}
		if replicaName != "r1" || typ != string(e.Type) || !gotAt.Equal(e.At.Truncate(time.Microsecond)) || truncated != trunc ||
			!sameInt(duration, e.DurationMs) || !sameInt(queueWait, e.QueueWaitMs) || !sameInt(execution, e.ExecutionMs) {
			rt.Fatalf("row: %s %s %v (want %v) %v %v %v %v", replicaName, typ, gotAt, e.At, truncated, duration, queueWait, execution)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}

// A record larger than one COPY data message (64 KiB) is stored whole,
// among small ones written in the same statement. (Issue 38.4.)
func TestAuditLargeRecordSpansCopyMessages(t *testing.T) {
	pool, _ := migrated(t)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1"})
	big := `{"blob":"` + strings.Repeat("ab€", 100_000) + `"}`
	for i := range 10 {
		e := surface.AuditEvent{At: time.Now(), Type: surface.AuditInvocationSettled, InvocationID: fmt.Sprint("small-", i)}
		if i == 5 {
			e.InvocationID, e.Payload = "big", &surface.AuditPayload{Input: surface.JSONText(big)}
		}
		if err := sink.Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	var got string
	var rows int
	if err := pool.QueryRow(context.Background(), `SELECT input::text FROM agentsurface_audit WHERE invocation_id = 'big'`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM agentsurface_audit`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if got != big || rows != 10 {
		t.Fatalf("stored %d rows, the big input %d bytes (want 10 rows, %d bytes)", rows, len(got), len(big))
	}
}

// The connection of a durable sink dies (its backend terminated) again
// and again while callers record at once: the sink opens another and
// writes again what was in flight, so that every Record returns nil and
// every record it acknowledged is stored. (Issue 38.4.)
func TestDurableAuditSurvivesATerminatedConnection(t *testing.T) {
	pool, _ := migrated(t)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1", Durable: true, Timeout: 30 * time.Second})
	defer sink.Close()
	const callers, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				errs <- recordSettled(sink, fmt.Sprintf("c%d-%d", c, i))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Terminate the sink's connection each time it has written another
	// 60 records, until the callers are done.
	killed := 0
	for k := 1; ; k++ {
		for sink.Stats().Written < uint64(60*k) {
			select {
			case <-done:
			case <-time.After(time.Millisecond): // poll the condition
				continue
			}
			break
		}
		select {
		case <-done:
		default:
			var n int
			err := pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'COPY agentsurface_audit%'`).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			killed += n
			continue
		}
		break
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a Record failed: %v", err)
		}
	}
	if killed == 0 {
		t.Fatal("the sink's connection was never terminated: the test proves nothing")
	}
	var distinct int
	if err := pool.QueryRow(context.Background(), `SELECT count(DISTINCT invocation_id) FROM agentsurface_audit`).Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if distinct != callers*each {
		t.Fatalf("%d acknowledged records stored, want %d (connections terminated: %d)", distinct, callers*each, killed)
	}
	if st := sink.Stats(); st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}
