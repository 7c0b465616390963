package replica_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// tee records into every sink; the first one's error is returned.
type tee []surface.AuditSink

func (t tee) Record(ctx context.Context, e surface.AuditEvent) error {
	var first error
	for _, s := range t {
		if err := s.Record(ctx, e); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// busyRegistry registers a component whose action audits at level full
// and invokes it n times.
func busyRegistry(t *testing.T, sink surface.AuditSink, n int) {
	t.Helper()
	reg := surfacetest.NewRegistry(t, &surface.Options{Audit: sink})
	surfacetest.MustRegister(t, reg, surface.Component{Type: "counter", Description: "Counter",
		Actions: map[string]surface.Capability{"add": surface.Action(surface.ActionDef[map[string]any, map[string]any]{
			Description: "Adds", Effect: surface.EffectLocalState, Audit: surface.AuditLevelFull,
			Execute: func(_ context.Context, _ *surface.Call, in map[string]any) (map[string]any, error) {
				return map[string]any{"got": in["n"]}, nil
			}})}})
	for i := range n {
		surfacetest.RequireOK(t, surfacetest.Invoke(t, reg, "view:counter.add", map[string]any{"n": i}))
	}
}

// The audit records of three replicas, several sessions each, all land
// in one table, every one of them, after a graceful Close.
func TestAuditFromAllReplicasInOneTable(t *testing.T) {
	pool, _ := migrated(t)
	var kept []*surface.MemorySink
	var sinks []*replica.AuditSink
	var wg sync.WaitGroup
	for r := range 3 {
		sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: fmt.Sprintf("r%d", r+1), BatchSize: 7})
		sinks = append(sinks, sink)
		for s := range 3 {
			mem := surface.NewMemorySink(10000)
			kept = append(kept, mem)
			session := fmt.Sprintf("r%d-s%d", r+1, s+1)
			wg.Go(func() { busyRegistry(t, tee{mem, sink.For(session)}, 40) })
		}
	}
	wg.Wait()
	for i, sink := range sinks {
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		if st := sink.Stats(); st.Dropped != 0 || st.Queued != 0 || st.Written == 0 {
			t.Fatalf("r%d: %+v", i+1, st)
		}
	}
	want := 0
	for _, m := range kept {
		want += len(m.Events())
	}
	var got, replicas, sessions, settled int
	err := pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT replica), count(DISTINCT session),
		count(*) FILTER (WHERE type = 'invocation-settled' AND status = 'ok' AND output::text LIKE '{"got":%')
		FROM agentsurface_audit`).Scan(&got, &replicas, &sessions, &settled)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || replicas != 3 || sessions != 9 || settled != 9*40 {
		t.Fatalf("table holds %d records of %d replicas and %d sessions (%d settled with output); want %d of 3 and 9 (360)",
			got, replicas, sessions, settled, want)
	}
}

// The columns hold the record's fields; text Postgres cannot store is
// made storable; a record Postgres refuses is dropped alone.
func TestAuditColumnsAndBadRecords(t *testing.T) {
	pool, _ := migrated(t)
	logs := new(syncWriter)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	at := time.Date(2026, 12, 1, 10, 0, 0, 123e6, time.UTC)
	ms, wait, exec := int64(42), int64(30), int64(12)
	events := []surface.AuditEvent{
		{At: at, Type: surface.AuditInvocationSettled, CapabilityID: "view:a.b", RegistrationID: "reg_1", InvocationID: "inv_1",
			ConsumerID: "mcp-bridge:agent", Status: surface.StatusError, Code: surface.CodeNotAuthorized, DurationMs: &ms,
			QueueWaitMs: &wait, ExecutionMs: &exec,
			Payload: &surface.AuditPayload{Input: `{"ids":["d1"]}`, Truncated: true}},
		{At: at, Type: surface.AuditConfirmationApproved, ConfirmationID: "conf_1", Actor: "olivia\x00 (browser)", Reason: "bad \xff utf-8"},
		{At: at, Type: surface.AuditInvocationSettled, InvocationID: "inv_bad", Payload: &surface.AuditPayload{Output: "{not json"}},
		{At: at, Type: surface.AuditRegistration, RegistrationID: "reg_2"},
	}
	for _, e := range events {
		if err := sink.For("s1").Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if st := sink.Stats(); st.Written != 3 || st.Dropped != 1 {
		t.Fatalf("stats %+v, want 3 written, 1 dropped", st)
	}
	if !strings.Contains(logs.String(), "Postgres refused an audit record") || !strings.Contains(logs.String(), "inv_bad") {
		t.Fatalf("the refused record is not in the log:\n%s", logs.String())
	}
	var (
		gotAt                              time.Time
		typ, capID, code, status, consumer string
		dur, queueWait, execution          *int64
		input                              string
		truncated                          bool
	)
	err := pool.QueryRow(context.Background(), `SELECT at, type, capability_id, code, status, consumer_id, duration_ms,
		queue_wait_ms, execution_ms, input::text, truncated FROM agentsurface_audit WHERE invocation_id = 'inv_1'`).
		Scan(&gotAt, &typ, &capID, &code, &status, &consumer, &dur, &queueWait, &execution, &input, &truncated)
	if err != nil {
		t.Fatal(err)
	}
	if !gotAt.Equal(at) || typ != "invocation-settled" || capID != "view:a.b" || code != "NOT_AUTHORIZED" || status != "error" ||
		consumer != "mcp-bridge:agent" || dur == nil || *dur != 42 || input != `{"ids":["d1"]}` || !truncated ||
		queueWait == nil || *queueWait != 30 || execution == nil || *execution != 12 { // AS-OBSV-001: wait and execution apart
		t.Fatalf("row: %v %s %s %s %s %s %v %s %v", gotAt, typ, capID, code, status, consumer, dur, input, truncated)
	}
	var actor, reason string
	if err := pool.QueryRow(context.Background(), `SELECT actor, reason FROM agentsurface_audit WHERE confirmation_id = 'conf_1'`).Scan(&actor, &reason); err != nil {
		t.Fatal(err)
	}
	if actor != "olivia\uFFFD (browser)" || reason != "bad \uFFFD utf-8" {
		t.Fatalf("cleaned text: %q %q", actor, reason)
	}
}

// While Postgres is down the sink keeps taking records up to its queue,
// drops and counts the rest, says so in the log and the metric, and
// writes the queued ones once Postgres is back: none of them is lost.
func TestAuditWhilePostgresIsDown(t *testing.T) {
	srv, pool, _ := privateMigrated(t)
	logs := new(syncWriter)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1", QueueSize: 50, Timeout: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), MeterProvider: mp})
	defer sink.Close()
	record := func(i int) error {
		return sink.Record(context.Background(), surface.AuditEvent{At: time.Now(), Type: surface.AuditInvocationSettled,
			InvocationID: fmt.Sprintf("inv_%d", i), Status: surface.StatusOK})
	}
	if err := record(0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first record written", func() bool { return sink.Stats().Written == 1 })
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for i := 1; i <= 80; i++ {
		if err := record(i); errors.Is(err, surface.ErrAuditDropped) {
			dropped++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// The writer holds one batch while it retries; the queue holds the rest.
	st := sink.Stats()
	if dropped != 30 || st.Dropped != 30 || st.Queued != 50 {
		t.Fatalf("during the outage: %d refused, stats %+v; want 30 dropped, 50 queued", dropped, st)
	}
	eventually(t, 30*time.Second, "the drops and the failing writes logged", func() bool {
		s := logs.String()
		return strings.Contains(s, "audit records dropped") && strings.Contains(s, "cannot write audit records")
	})
	if got := auditMetric(t, reader, "dropped"); got != 30 {
		t.Fatalf("agentsurface.audit.records{outcome=dropped} = %d, want 30", got)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the queued records written", func() bool { return sink.Stats().Written == 51 })
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(DISTINCT invocation_id) FROM agentsurface_audit`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 51 {
		t.Fatalf("table holds %d records, want 51", n)
	}
	if got := auditMetric(t, reader, "written"); got != 51 {
		t.Fatalf("agentsurface.audit.records{outcome=written} = %d, want 51", got)
	}
}

// Close with Postgres down gives up after CloseTimeout, counting and
// logging what it could not write.
func TestAuditCloseWithPostgresDownIsBounded(t *testing.T) {
	srv, pool, _ := privateMigrated(t)
	logs := new(syncWriter)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{CloseTimeout: 700 * time.Millisecond, Timeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := sink.Record(context.Background(), surface.AuditEvent{At: time.Now(), Type: surface.AuditRegistration,
			RegistrationID: fmt.Sprint("reg_", i)}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v with a CloseTimeout of 700ms", took)
	}
	if st := sink.Stats(); st.Dropped != 10 || st.Written != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v, want 10 dropped", st)
	}
	if !strings.Contains(logs.String(), "closing: Postgres did not take them") {
		t.Fatalf("log:\n%s", logs.String())
	}
	if err := sink.Record(context.Background(), surface.AuditEvent{Type: surface.AuditRegistration}); !errors.Is(err, surface.ErrAuditDropped) {
		t.Fatalf("Record after Close: %v", err)
	}
}

// auditMetric reads agentsurface.audit.records for one outcome.
func auditMetric(t *testing.T, r *sdkmetric.ManualReader, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "agentsurface.audit.records" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, _ := dp.Attributes.Value("agentsurface.audit.outcome"); v.AsString() == outcome {
					return dp.Value
				}
			}
		}
	}
	return -1
}

// syncWriter makes a writer safe for the sink's goroutine and the test.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A durable sink's Record returns once its record is committed: a
// reader that queries right after finds it. Records of concurrent calls
// share commits (group commit). (Issue 38.4.)
func TestDurableAuditCommitsBeforeRecordReturns(t *testing.T) {
	pool, url := migrated(t)
	reader := openPool(t, url)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1", Durable: true})
	defer sink.Close()
	const callers, each = 16, 10
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("inv_%d_%d", c, i)
				if err := sink.For("s1").Record(context.Background(), surface.AuditEvent{At: time.Now(),
					Type: surface.AuditInvocationSettled, InvocationID: id, Status: surface.StatusOK}); err != nil {
					t.Errorf("Record %s: %v", id, err)
					return
				}
				var n int
				if err := reader.QueryRow(context.Background(), `SELECT count(*) FROM agentsurface_audit WHERE invocation_id = $1`, id).Scan(&n); err != nil || n != 1 {
					t.Errorf("%s right after Record returned: %d rows, %v", id, n, err)
				}
			}
		})
	}
	wg.Wait()
	// 64 callers at once: their records share a few transactions.
	start := make(chan struct{})
	for c := range 64 {
		wg.Go(func() {
			<-start
			if err := sink.Record(context.Background(), surface.AuditEvent{At: time.Now(), Type: surface.AuditInvocationSettled,
				InvocationID: fmt.Sprint("burst_", c), Status: surface.StatusOK}); err != nil {
				t.Errorf("Record: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	var txs int
	if err := reader.QueryRow(context.Background(), `SELECT count(DISTINCT xmin::text) FROM agentsurface_audit WHERE invocation_id LIKE 'burst_%'`).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	t.Logf("64 concurrent records committed in %d transactions", txs)
	if txs > 16 {
		t.Errorf("64 concurrent records took %d commits: no group commit", txs)
	}
	if st := sink.Stats(); st.Written != callers*each+64 || st.Dropped != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Through a registry, a durable sink stores a call's invocation-started
// record before its handler runs, and its settlement before Invoke
// returns: a handler that looks finds its call's trace, and the caller
// finds the settlement. (Issue 38.4; AuditOptions.Durable.)
func TestDurableAuditStoresTheStartBeforeTheHandlerRuns(t *testing.T) {
	pool, url := migrated(t)
	reader := openPool(t, url)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1", Durable: true})
	defer sink.Close()
	reg := surface.New(&surface.Options{Audit: sink.For("s1")})
	defer reg.Close()
	count := func(id, typ string) int {
		var n int
		if err := reader.QueryRow(context.Background(), `SELECT count(*) FROM agentsurface_audit WHERE invocation_id = $1 AND type = $2`,
			id, typ).Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	type none struct{}
	seen := make(chan int, 64)
	_, err := reg.Register(surface.Component{Type: "devices.table", Description: "Devices", Actions: map[string]surface.Capability{
		"select": surface.Action(surface.ActionDef[none, none]{
			Description: "Select", Effect: surface.EffectLocalState,
			Concurrency: surface.Concurrency[none]{Mode: surface.ConcurrencyParallel, Max: 8},
			Execute: func(_ context.Context, call *surface.Call, _ none) (none, error) {
				seen <- count(call.InvocationID, string(surface.AuditInvocationStarted))
				return none{}, nil
			},
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for c := range 8 { // concurrent calls, so that records share commits
		wg.Go(func() {
			for i := range 4 {
				id := fmt.Sprintf("inv_%d_%d", c, i)
				res := reg.Invoke(context.Background(), surface.Invocation{InvocationID: id, CapabilityID: "view:devices.table.select",
					Input: json.RawMessage(`{}`)}, surface.InvokeOptions{Consumer: surface.Consumer{ID: fmt.Sprint("agent-", c), Kind: surface.ConsumerEmbedded}})
				if res.Error != nil {
					t.Errorf("%s: %v", id, res.Error)
					return
				}
				if n := count(id, string(surface.AuditInvocationSettled)); n != 1 {
					t.Errorf("%s: %d settlement records once Invoke returned, want 1", id, n)
				}
			}
		})
	}
	wg.Wait()
	close(seen)
	calls := 0
	for n := range seen {
		calls++
		if n != 1 {
			t.Errorf("the handler found %d invocation-started records of its call, want 1", n)
		}
	}
	if calls != 32 {
		t.Fatalf("%d handlers ran, want 32", calls)
	}
}

// While Postgres is down a durable Record gives up after Timeout, counts
// the record lost and says so; the record is not written later (the
// count is the truth). Once Postgres is back, records are committed
// again. (Issue 38.4.)
func TestDurableAuditWithPostgresDown(t *testing.T) {
	srv, pool, url := privateMigrated(t)
	logs := new(syncWriter)
	const timeout = 500 * time.Millisecond
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1", Durable: true, Timeout: timeout,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	defer sink.Close()
	record := func(id string) error { return recordSettled(sink, id) }
	if err := record("before"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			start := time.Now()
			err := record(fmt.Sprint("during_", i))
			if took := time.Since(start); !errors.Is(err, surface.ErrAuditDropped) || took < timeout || took > timeout+3*time.Second {
				t.Errorf("Record with Postgres down: %v after %v, want ErrAuditDropped after %v", err, took, timeout)
			}
		})
	}
	wg.Wait()
	if st := sink.Stats(); st.Dropped != 5 || st.Written != 1 || st.Queued != 0 {
		t.Fatalf("stats during the outage: %+v", st)
	}
	if !strings.Contains(logs.String(), "not committed within Timeout") {
		t.Fatalf("the lost records are not in the log:\n%s", logs.String())
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "records are committed again", func() bool { return record("after") == nil })
	var ids []string
	rows, err := openPool(t, url).Query(context.Background(), `SELECT invocation_id FROM agentsurface_audit ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(ids) < 2 || ids[0] != "before" || ids[len(ids)-1] != "after" || slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, "during_") }) {
		t.Fatalf("the table holds %v", ids)
	}
	if st := sink.Stats(); st.Written != uint64(len(ids)) {
		t.Fatalf("stats %+v, table %d rows", st, len(ids))
	}
}

// A durable sink loses no record to an outage shorter than Timeout: with
// Postgres stopped, each writer keeps the record its failed write held
// and the others wait queued (Stats.Queued counts them all); Close,
// called meanwhile, refuses new records and waits; once Postgres is back
// every waiting record is committed, once, and its Record returns nil.
// (Issue 38.4.)
func TestDurableAuditOutageLosesNoWaitingRecord(t *testing.T) {
	srv, pool, url := privateMigrated(t)
	sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "r1", Durable: true, BatchSize: 1,
		Timeout: time.Minute, CloseTimeout: time.Minute})
	record := func(id string) error { return recordSettled(sink, id) }
	if err := record("before"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	const n = 6
	answers := make(chan error, n)
	for i := range n {
		go func() { answers <- record(fmt.Sprint("during_", i)) }()
	}
	eventually(t, 30*time.Second, "every record waiting", func() bool { return sink.Stats().Queued == n })
	closed := make(chan error, 1)
	go func() { closed <- sink.Close() }()
	eventually(t, 30*time.Second, "Close called", sink.Closing)
	if err := record("late"); !errors.Is(err, surface.ErrAuditDropped) {
		t.Fatalf("Record during Close: %v", err)
	}
	select {
	case err := <-answers:
		t.Fatalf("a record answered (%v) while Postgres is down", err)
	default:
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-answers; err != nil {
			t.Fatalf("a record waiting through the outage: %v", err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	rows, err := openPool(t, url).Query(context.Background(), `SELECT invocation_id FROM agentsurface_audit ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"before"}
	for i := range n {
		want = append(want, fmt.Sprint("during_", i))
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("the table holds %v, want each of %v once", ids, want)
	}
	if st := sink.Stats(); st.Written != n+1 || st.Dropped != 1 || st.Queued != 0 {
		t.Fatalf("stats %+v, want %d written, 1 dropped (refused while closing)", st, n+1)
	}
}

// recordSettled records the settlement of the invocation id in sink.
func recordSettled(sink *replica.AuditSink, id string) error {
	return sink.Record(context.Background(), surface.AuditEvent{At: time.Now(), Type: surface.AuditInvocationSettled,
		InvocationID: id, Status: surface.StatusOK})
}
