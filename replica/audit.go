package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// AuditOptions configure an [AuditSink]. The zero value (or nil) is valid.
type AuditOptions struct {
	// Replica tags every record with the replica that wrote it. Default:
	// the host name.
	Replica string
	// Durable makes Record return only once its record is committed in
	// Postgres. The registry records a call's settlement before it
	// answers, so no answer leaves before its record is stored: a replica
	// killed at any moment has lost no record of a call it answered.
	// Records that arrive while a write is under way are written together
	// by the next one, one COPY and one commit (group commit), and after
	// each write the writer lets the callers it has just answered run
	// before it takes the next batch, so that their next records join it.
	// A call answers one to two commits later. Each commit has a fixed
	// cost (a round trip and a transaction: about half a millisecond of
	// CPU on a small machine) shared by the records it writes, so the
	// sink commits about as many records per second as there are Records
	// waiting at once, divided by a commit's latency: its throughput grows
	// with concurrent calls but stays below the asynchronous sink's, which
	// writes up to BatchSize records per commit. On 2 CPUs it commits
	// about 0.55× the asynchronous sink's records per second with 64
	// Records at once and 0.75× with 256 (BenchmarkAuditSink), and a
	// replica answers audited HTTP calls from 64 clients at about 0.8×
	// the rate (BenchmarkAuditedCalls).
	//
	// Record waits at most Timeout: a record not committed by then is
	// withdrawn, counted as dropped and logged, and Record returns an
	// error wrapping [surface.ErrAuditDropped], which the registry logs
	// before it answers the call (if Postgres was committing the record
	// when Timeout ran out, it may be stored nonetheless). This departs
	// from [surface.AuditSink]'s "must not block" by that bound: while
	// Postgres is unreachable every audited call waits Timeout for each of
	// its records. Default false: Record queues the record and returns at
	// once, and a process that dies loses what was queued (the records of
	// the last few milliseconds).
	Durable bool
	// QueueSize bounds the records waiting to be written. When it is full
	// (Postgres slow or down for long), Record drops the record, counts
	// it and returns [surface.ErrAuditDropped]. Default 10000.
	QueueSize int
	// BatchSize bounds the records written in one COPY. Default 500.
	BatchSize int
	// Timeout bounds each write and, with Durable, how long Record waits
	// for its record's commit. Default 5s.
	Timeout time.Duration
	// CloseTimeout bounds how long Close keeps trying to write what is
	// queued, from the moment it is called (a write already under way
	// keeps its own Timeout); what it cannot write by then is dropped,
	// counted and logged. Default 10s.
	CloseTimeout time.Duration
	// Logger receives diagnostics: a failing write (once, then once every
	// ten seconds while it goes on) and dropped records. Default: discard.
	Logger *slog.Logger
	// MeterProvider makes the sink's metrics (see the package
	// documentation). Default: the global meter provider.
	MeterProvider metric.MeterProvider
}

// AuditSink writes the audit records of every registry of this replica
// to the agentsurface_audit table ([Migrate] creates it), shared with
// every other replica: the whole deployment's audit trail is one table.
//
// Record queues the record, and one goroutine writes the queue in
// batches (COPY) as fast as Postgres takes them: each write takes every
// record queued while the previous one ran, up to BatchSize, in one
// statement and one commit. By default Record never blocks; with
// AuditOptions.Durable it returns once its record is committed (or, at
// most, after Timeout), and the writer yields to the Records it has just
// answered before it takes its next batch (AuditOptions.Durable says
// what durability costs in throughput). While Postgres is unreachable
// the queue holds the records and the writer retries; the records beyond
// QueueSize (and, with Durable, those not committed within Timeout) are
// dropped, counted in [AuditSink.Stats] and the
// agentsurface.audit.records metric, and logged. A record Postgres
// refuses as invalid is dropped alone, not its batch. Close writes what
// is queued, for at most CloseTimeout. It is safe for concurrent use.
type AuditSink struct {
	// copyRows writes rows in one statement and one commit: a COPY into
	// agentsurface_audit (tests put a fake Postgres here).
	copyRows func(ctx context.Context, rows [][]any) error
	opts     AuditOptions
	log      *slog.Logger
	wake     chan struct{} // a record was queued
	stop     chan struct{} // Close was called
	done     chan struct{} // the writer has returned
	metrics  metric.Registration

	mu      sync.Mutex
	queue   []entry
	closed  bool
	closeBy time.Time // when Close gives up writing what is queued
	written uint64
	dropped uint64
	// Log throttling: drops since the last log line and when that was.
	dropsUnlogged uint64
	lastDropLog   time.Time
}

// auditRow is one record as written, in the column order of auditColumns.
type auditRow []any

// entry is a queued record.
type entry struct {
	row auditRow
	// With Durable: when Record stops waiting, and where the writer sends
	// its verdict (nil: committed), once (the channel has room for it).
	deadline time.Time
	done     chan error
}

// Verdicts of durable records that were not stored.
var (
	errAuditTimeout = fmt.Errorf("%w: not committed within AuditOptions.Timeout", surface.ErrAuditDropped)
	errAuditRefused = fmt.Errorf("%w: refused by Postgres", surface.ErrAuditDropped)
	errAuditClosing = fmt.Errorf("%w: Postgres did not take it before Close gave up", surface.ErrAuditDropped)
)

var auditColumns = []string{"replica", "session", "at", "type", "capability_id", "registration_id",
	"invocation_id", "confirmation_id", "consumer_id", "status", "code", "duration_ms", "queue_wait_ms",
	"execution_ms", "actor", "reason", "input", "output", "truncated"}

// NewAuditSink starts a sink writing to pool's agentsurface_audit table.
// Close it to write what is queued and stop its goroutine.
func NewAuditSink(pool *pgxpool.Pool, opts *AuditOptions) *AuditSink {
	return newAuditSink(func(ctx context.Context, rows [][]any) error {
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"agentsurface_audit"}, auditColumns, pgx.CopyFromRows(rows))
		return err
	}, opts)
}

// newAuditSink starts a sink whose writes go to copyRows: one call, one
// statement and one commit.
func newAuditSink(copyRows func(ctx context.Context, rows [][]any) error, opts *AuditOptions) *AuditSink {
	var o AuditOptions
	if opts != nil {
		o = *opts
	}
	if o.Replica == "" {
		o.Replica, _ = os.Hostname()
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 10000
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 10 * time.Second
	}
	s := &AuditSink{copyRows: copyRows, opts: o, log: o.Logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.metrics = s.registerMetrics(o.MeterProvider)
	go s.run()
	return s
}

// Record implements surface.AuditSink for records of no particular
// session. It never blocks, unless the sink is durable (see
// AuditOptions.Durable).
func (s *AuditSink) Record(_ context.Context, e surface.AuditEvent) error {
	return s.record("", e)
}

// For returns a sink that records into s with session as each record's
// session column: give each session's registry its own, so that the
// table says which session every record belongs to.
func (s *AuditSink) For(session string) surface.AuditSink {
	return sessionSink{s, session}
}

type sessionSink struct {
	s       *AuditSink
	session string
}

// Record implements surface.AuditSink.
func (ss sessionSink) Record(_ context.Context, e surface.AuditEvent) error {
	return ss.s.record(ss.session, e)
}

func (s *AuditSink) record(session string, e surface.AuditEvent) error {
	en := entry{row: s.row(session, e)}
	if s.opts.Durable {
		en.done = make(chan error, 1)
	}
	s.mu.Lock()
	if s.closed || len(s.queue) >= s.opts.QueueSize {
		s.dropLocked(1, "the audit queue is full or the sink closed")
		s.mu.Unlock()
		return surface.ErrAuditDropped
	}
	if en.done != nil {
		// Set under the lock: the queue's deadlines never decrease.
		en.deadline = time.Now().Add(s.opts.Timeout)
	}
	s.queue = append(s.queue, en)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if en.done == nil {
		return nil
	}
	return <-en.done // the writer answers by the deadline
}

// row returns e as a table row. Text that Postgres cannot store (invalid
// UTF-8, NUL) is made storable rather than lost.
func (s *AuditSink) row(session string, e surface.AuditEvent) auditRow {
	var in, out any
	var truncated bool
	if p := e.Payload; p != nil {
		if p.Input != "" {
			in = cleanText(string(p.Input))
		}
		if p.Output != "" {
			out = cleanText(string(p.Output))
		}
		truncated = p.Truncated
	}
	return auditRow{s.opts.Replica, optional(session), e.At, cleanText(string(e.Type)),
		optional(e.CapabilityID), optional(e.RegistrationID), optional(e.InvocationID), optional(e.ConfirmationID),
		optional(e.ConsumerID), optional(string(e.Status)), optional(string(e.Code)),
		e.DurationMs, e.QueueWaitMs, e.ExecutionMs, optional(e.Actor), optional(e.Reason), in, out, truncated}
}

// optional returns nil (NULL) for "", else s made storable.
func optional(s string) any {
	if s == "" {
		return nil
	}
	return cleanText(s)
}

// cleanText replaces invalid UTF-8 and NUL, which Postgres text refuses.
func cleanText(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// dropLocked counts n dropped records and logs it, at most once every ten
// seconds (the count says how many since the last line).
func (s *AuditSink) dropLocked(n int, why string) {
	s.dropped += uint64(n)
	s.dropsUnlogged += uint64(n)
	if now := time.Now(); now.Sub(s.lastDropLog) >= 10*time.Second {
		s.log.Error("replica: audit records dropped", "dropped", s.dropsUnlogged, "dropped_total", s.dropped,
			"queued", len(s.queue), "reason", why)
		s.dropsUnlogged, s.lastDropLog = 0, now
	}
}

// run writes the queue until Close, then what is left, within
// CloseTimeout.
func (s *AuditSink) run() {
	defer close(s.done)
	var deadline time.Time // when Close gives up: zero until it is called
	backoff := minBackoff
	var failing, lastFailLog time.Time // when writes started failing; when that was last logged
	for {
		s.mu.Lock()
		deadline = s.closeBy
		s.expireLocked(time.Now())
		batch := s.queue[:min(len(s.queue), s.opts.BatchSize)]
		s.mu.Unlock()
		if len(batch) == 0 {
			if !deadline.IsZero() {
				return
			}
			select {
			case <-s.wake:
			case <-s.stop:
			}
			continue
		}
		// Record only appends, past the batch, and only this goroutine
		// removes from the front: the batch is not touched while it is
		// written.
		verdicts, err := s.write(batch, deadline)
		s.mu.Lock()
		for i, v := range verdicts {
			if v == nil {
				s.written++
			}
			if done := s.queue[i].done; done != nil {
				done <- v
			}
		}
		clear(s.queue[:len(verdicts)]) // no reference to a settled record stays
		s.queue = s.queue[len(verdicts):]
		queued := len(s.queue)
		s.mu.Unlock()
		if s.opts.Durable && len(verdicts) > 0 {
			// The Records just answered are ready to run, mostly on
			// this goroutine's processor. Yield to them, so that the
			// records their callers make next are queued before this
			// writer takes its next batch and share its commit, rather
			// than wait for another one.
			runtime.Gosched()
		}
		if err == nil {
			if !failing.IsZero() {
				s.log.Info("replica: audit writes resumed", "after", time.Since(failing).Round(time.Millisecond), "queued", queued)
				failing = time.Time{}
			}
			backoff = minBackoff
			continue
		}
		now := time.Now()
		if failing.IsZero() {
			failing = now
		}
		if now.Sub(lastFailLog) >= 10*time.Second {
			s.log.Warn("replica: cannot write audit records; keeping them queued and retrying",
				"queued", queued, "queue_size", s.opts.QueueSize, "error", err)
			lastFailLog = now
		}
		if !deadline.IsZero() && !now.Before(deadline) {
			s.mu.Lock()
			n := len(s.queue)
			for _, en := range s.queue {
				if en.done != nil {
					en.done <- errAuditClosing
				}
			}
			s.queue = nil
			s.lastDropLog = time.Time{} // say it now
			s.dropLocked(n, "closing: Postgres did not take them within CloseTimeout")
			s.mu.Unlock()
			return
		}
		wait := backoff
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		s.mu.Lock()
		if d := s.queue[0].deadline; !d.IsZero() {
			wait = min(wait, time.Until(d)) // its Record is waiting for a verdict
		}
		s.mu.Unlock()
		stop := s.stop
		if !deadline.IsZero() {
			stop = nil // closing already: only the deadline counts
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// expireLocked withdraws the durable records at the front of the queue
// whose Record stopped waiting at now: they are lost. Deadlines never
// decrease along the queue.
func (s *AuditSink) expireLocked(now time.Time) {
	n := 0
	for n < len(s.queue) && !s.queue[n].deadline.IsZero() && !now.Before(s.queue[n].deadline) {
		s.queue[n].done <- errAuditTimeout
		n++
	}
	if n == 0 {
		return
	}
	clear(s.queue[:n])
	s.queue = s.queue[n:]
	s.dropLocked(n, "not committed within Timeout (durable)")
}

// Retry intervals of a failing write.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// write writes batch within Timeout (or by closing, the end of
// CloseTimeout), and by the deadline of its first durable record, whose
// Record waits for it. It returns the verdicts of the records from its
// front that are done with: nil for those stored, an error for those
// Postgres refused (dropped, counted and logged). A batch that Postgres
// refuses for its data is written row by row, and the rows it refuses are
// dropped; any other failure is returned, and the rows not done with are
// retried.
func (s *AuditSink) write(batch []entry, closing time.Time) (verdicts []error, err error) {
	end := time.Now().Add(s.opts.Timeout)
	if !closing.IsZero() {
		end = closing
	}
	if d := batch[0].deadline; !d.IsZero() && d.Before(end) {
		end = d
	}
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	rows := make([][]any, len(batch))
	for i, en := range batch {
		rows[i] = en.row
	}
	err = s.copyRows(ctx, rows)
	switch {
	case err == nil:
		return make([]error, len(rows)), nil
	case !invalidData(err):
		// The retry (after the backoff) gets another connection: the pool
		// drops one that broke.
		return nil, err
	}
	verdicts = make([]error, 0, len(rows))
	for _, r := range rows {
		err := s.copyRows(ctx, [][]any{r})
		switch {
		case err == nil:
			verdicts = append(verdicts, nil)
		case invalidData(err):
			s.log.Error("replica: Postgres refused an audit record; it is dropped", "type", r[3], "invocationId", r[6], "error", err)
			s.mu.Lock()
			s.lastDropLog = time.Time{}
			s.dropLocked(1, "refused by Postgres")
			s.mu.Unlock()
			verdicts = append(verdicts, errAuditRefused)
		default:
			return verdicts, err
		}
	}
	return verdicts, nil
}

// invalidData reports whether Postgres refused the data itself (SQLSTATE
// classes 22, data exception, and 23, integrity constraint violation),
// which no retry can fix.
func invalidData(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
}

// AuditStats counts an AuditSink's records.
type AuditStats struct {
	Written uint64 // stored in Postgres
	Dropped uint64 // lost: queue full, refused by Postgres, or not written by the end of Close
	Queued  int    // waiting to be written
}

// Stats returns the sink's counters.
func (s *AuditSink) Stats() AuditStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return AuditStats{Written: s.written, Dropped: s.dropped, Queued: len(s.queue)}
}

// Close stops taking records, writes those queued (trying for at most
// CloseTimeout) and stops the writer. Records it could not write are
// counted as dropped, and logged. It is idempotent.
func (s *AuditSink) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.closeBy = time.Now().Add(s.opts.CloseTimeout)
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.done
	if s.metrics != nil {
		_ = s.metrics.Unregister()
		s.metrics = nil
	}
	return nil
}

func (s *AuditSink) registerMetrics(mp metric.MeterProvider) metric.Registration {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	records, err1 := m.Int64ObservableCounter(metricAudit, metric.WithUnit("{record}"),
		metric.WithDescription("Audit records, by outcome: written to Postgres or dropped."))
	queued, err2 := m.Int64ObservableGauge(metricQueue, metric.WithUnit("{record}"),
		metric.WithDescription("Audit records waiting to be written."))
	if err := errors.Join(err1, err2); err != nil {
		s.log.Warn("replica: the meter provider refused an instrument; metrics are incomplete", "error", err)
	}
	written := metric.WithAttributes(attribute.String("agentsurface.audit.outcome", "written"))
	dropped := metric.WithAttributes(attribute.String("agentsurface.audit.outcome", "dropped"))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveInt64(records, int64(st.Written), written)
		o.ObserveInt64(records, int64(st.Dropped), dropped)
		o.ObserveInt64(queued, int64(st.Queued))
		return nil
	}, records, queued)
	if err != nil {
		s.log.Warn("replica: cannot register the metrics callback", "error", err)
		return nil
	}
	return reg
}
