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
	// killed at any moment has lost no record of a call it answered. A
	// registry's call of an action records invocation-started before its
	// handler runs and invocation-settled before it answers, and waits
	// for each commit: no handler runs before a trace of its call is
	// stored (unless Record gave up, below), and a call waits for two
	// commits.
	// Records that arrive while a write is under way are written together
	// by a following one, one COPY and one commit (group commit). The
	// writer keeps two writes in flight on its connection, so that
	// Postgres starts the next one as soon as it has committed one, and
	// after each commit it lets the callers it has just answered run
	// before it takes its next batch, so that their next records join it.
	// A call answers one to two commits later. Each commit has a fixed
	// cost (a round trip and a transaction, about 0.15 ms of Postgres
	// CPU on a small machine, and the flush of Postgres's log to disk)
	// shared by the records it writes, so the sink's throughput grows
	// with the Records waiting at once, and stays below the asynchronous
	// sink's while few are, since that one writes up to BatchSize records
	// per commit. Measured on 2 CPUs shared by the replica and a
	// Postgres that flushes its log at every commit (its default), as a
	// share of the rate with the asynchronous sink:
	//
	//   - a replica's audited HTTP calls (one record each,
	//     BenchmarkAuditedCalls): about 0.9× with 256 clients at once,
	//     0.6× with 64, when each call takes about 2 ms longer, waiting
	//     for its commit, while the replica's CPU is partly idle;
	//   - a registry's calls of an action (two records each,
	//     BenchmarkAuditedInvoke): about 0.95× with 256 callers, 0.55×
	//     with 64;
	//   - the sink alone (BenchmarkAuditSink): about 0.8× the records
	//     with 256 Records at once, 0.5× with 64, each of which waits
	//     about 1.4 ms.
	//
	// Give a durable replica more calls in flight than an asynchronous
	// one for the same rate.
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
// Record encodes the record and queues it, and one goroutine writes the
// queue in batches (COPY) as fast as Postgres takes them: each write
// takes the records queued while the previous one ran, up to BatchSize,
// in one statement and one commit. The writer keeps a connection of its
// own, taken out of the pool (it does not count in the pool's MaxConns),
// and runs each COPY itself, one write and one read. By default Record
// never blocks; with AuditOptions.Durable it returns once its record is
// committed (or, at most, after Timeout), the writer keeps a second
// write in flight behind the first, and it yields to the Records it has
// just answered before it takes its next batch (AuditOptions.Durable
// says what durability costs in throughput). While Postgres is
// unreachable the queue holds the records and the writer retries; the
// records beyond QueueSize (and, with Durable, those not committed
// within Timeout) are dropped, counted in [AuditSink.Stats] and the
// agentsurface.audit.records metric, and logged. A record Postgres
// refuses as invalid is dropped alone, not its batch. Close writes what
// is queued, for at most CloseTimeout, and closes the connection. It is
// safe for concurrent use.
type AuditSink struct {
	db      auditStore // only the writer goroutine uses it
	opts    AuditOptions
	log     *slog.Logger
	depth   int           // statements the writer keeps in flight
	wake    chan struct{} // a record was queued
	stop    chan struct{} // Close was called
	done    chan struct{} // the writer has returned
	metrics metric.Registration

	mu      sync.Mutex
	queue   []entry // waiting to be sent, oldest first
	sending int     // sent, and not yet settled
	closed  bool
	closeBy time.Time // when Close gives up writing what is queued
	written uint64
	dropped uint64
	// Log throttling: drops since the last log line and when that was.
	dropsUnlogged uint64
	lastDropLog   time.Time
}

// entry is a queued record.
type entry struct {
	row auditRow
	// With Durable: when Record stops waiting, and where the writer sends
	// its verdict (nil: committed), once (the channel has room for it).
	deadline time.Time
	done     chan error
}

// statement is a write the writer has sent: its records, when it must
// be done by, and, once read, its result.
type statement struct {
	batch  []entry
	end    time.Time
	result error
	read   bool
}

// Verdicts of durable records that were not stored.
var (
	errAuditTimeout = fmt.Errorf("%w: not committed within AuditOptions.Timeout", surface.ErrAuditDropped)
	errAuditRefused = fmt.Errorf("%w: refused by Postgres", surface.ErrAuditDropped)
	errAuditClosing = fmt.Errorf("%w: Postgres did not take it before Close gave up", surface.ErrAuditDropped)
)

// NewAuditSink starts a sink writing to pool's agentsurface_audit table,
// on a connection it takes out of pool (and takes again if it breaks).
// Close it to write what is queued, stop its goroutine and close its
// connection.
func NewAuditSink(pool *pgxpool.Pool, opts *AuditOptions) *AuditSink {
	return newAuditSink(&pgStore{pool: pool}, opts)
}

// newAuditSink starts a sink whose writes go to db.
func newAuditSink(db auditStore, opts *AuditOptions) *AuditSink {
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
	s := &AuditSink{db: db, opts: o, log: o.Logger, depth: 1,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if o.Durable {
		// Records wait for their commit: while Postgres writes one batch,
		// the next is on its way, so that Postgres never waits for the
		// writer to answer and gather. Records that do not wait gain
		// nothing from it (their batches are full).
		s.depth = 2
	}
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
	if s.closed || len(s.queue)+s.sending >= s.opts.QueueSize {
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
	f := auditFields{replica: cleanText(s.opts.Replica), session: cleanText(session), at: e.At,
		typ: cleanText(string(e.Type)), capability: cleanText(e.CapabilityID),
		registration: cleanText(e.RegistrationID), invocation: cleanText(e.InvocationID),
		confirmation: cleanText(e.ConfirmationID), consumer: cleanText(e.ConsumerID),
		status: cleanText(string(e.Status)), code: cleanText(string(e.Code)),
		durationMs: e.DurationMs, queueWaitMs: e.QueueWaitMs, executionMs: e.ExecutionMs,
		actor: cleanText(e.Actor), reason: cleanText(e.Reason)}
	if p := e.Payload; p != nil {
		f.input, f.output, f.truncated = cleanText(string(p.Input)), cleanText(string(p.Output)), p.Truncated
	}
	return f.encode()
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
// CloseTimeout. It sends a batch whenever fewer than depth statements are
// in flight, and reads their results in the order it sent them.
func (s *AuditSink) run() {
	defer close(s.done)
	defer s.db.reset()
	var flight []statement // sent, oldest first
	f := writeFailures{backoff: minBackoff}
	for {
		s.mu.Lock()
		closeBy := s.closeBy
		s.expireLocked(time.Now())
		var batch []entry
		if len(flight) < s.depth {
			n := min(len(s.queue), s.opts.BatchSize)
			// Record only appends, past the batch: the batch is the
			// writer's until it is settled.
			batch, s.queue = s.queue[:n:n], s.queue[n:]
			s.sending += n
		}
		s.mu.Unlock()
		var err error
		switch {
		case len(batch) > 0:
			st := statement{batch: batch, end: s.end(batch, closeBy)}
			flight = append(flight, st)
			if err = s.db.send(rows(batch), st.end); err == nil {
				continue
			}
		case len(flight) > 0:
			if flight, err = s.settleOldest(flight); err == nil {
				f.resumed(s)
				continue
			}
		case !closeBy.IsZero():
			return
		default:
			select {
			case <-s.wake:
			case <-s.stop:
			}
			continue
		}
		s.broken(flight)
		flight = nil
		if f.pause(s, err, closeBy) {
			return
		}
	}
}

// settleOldest reads the result of the oldest statement in flight and
// settles its records, and returns the statements still in flight. A
// batch that Postgres refuses for its data is written row by row, and
// the rows it refuses are dropped. Any other error means the connection
// broke: flight is returned as it is, for [AuditSink.broken].
func (s *AuditSink) settleOldest(flight []statement) ([]statement, error) {
	st := &flight[0]
	if !st.read {
		st.result, st.read = s.db.receive(st.end), true
	}
	switch {
	case st.result == nil:
		s.settle(st.batch, nil)
		if s.opts.Durable {
			// The Records just answered are ready to run, mostly on
			// this goroutine's processor. Yield to them, so that the
			// records their callers make next are queued before this
			// writer takes its next batch and share its commit, rather
			// than wait for another one.
			runtime.Gosched()
		}
		return flight[1:], nil
	case !invalidData(st.result):
		return flight, st.result
	}
	// Row by row, behind the statements still in flight: read their
	// results first, in order, by st's end, when its Records stop
	// waiting (if Postgres is slower, the connection is dropped).
	for i := 1; i < len(flight); i++ {
		if !flight[i].read {
			end := flight[i].end
			if st.end.Before(end) {
				end = st.end
			}
			flight[i].result, flight[i].read = s.db.receive(end), true
		}
		if r := flight[i].result; r != nil && !invalidData(r) {
			return flight, r
		}
	}
	verdicts, err := s.oneByOne(st.batch, st.end)
	s.settle(st.batch[:len(verdicts)], verdicts)
	st.batch = st.batch[len(verdicts):]
	if err != nil {
		return flight, err
	}
	return flight[1:], nil
}

// oneByOne writes the rows of batch one statement each, until end, and
// returns the verdicts of those done with: nil for those stored,
// errAuditRefused for those Postgres refused (dropped, counted and
// logged). It stops at any other error.
func (s *AuditSink) oneByOne(batch []entry, end time.Time) ([]error, error) {
	verdicts := make([]error, 0, len(batch))
	for _, en := range batch {
		err := s.db.send([]auditRow{en.row}, end)
		if err == nil {
			err = s.db.receive(end)
		}
		switch {
		case err == nil:
			verdicts = append(verdicts, nil)
		case invalidData(err):
			s.log.Error("replica: Postgres refused an audit record; it is dropped", "record", en.row, "error", err)
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

// settle gives the records of batch their verdicts (nil: all committed),
// counts those written, and lets go of them.
func (s *AuditSink) settle(batch []entry, verdicts []error) {
	s.mu.Lock()
	for i, en := range batch {
		var v error
		if verdicts != nil {
			v = verdicts[i]
		}
		if v == nil {
			s.written++
		}
		if en.done != nil {
			en.done <- v
		}
	}
	s.sending -= len(batch)
	s.mu.Unlock()
	clear(batch) // no reference to a settled record stays
}

// broken drops the connection, which broke with flight in the air: a
// statement read as committed is settled, and the records of the others
// go back to the front of the queue, in order, to be sent again.
func (s *AuditSink) broken(flight []statement) {
	s.db.reset()
	var again []entry
	for _, st := range flight {
		if st.read && st.result == nil {
			s.settle(st.batch, nil)
			continue
		}
		again = append(again, st.batch...)
		clear(st.batch)
	}
	s.mu.Lock()
	s.sending -= len(again)
	s.queue = append(again, s.queue...)
	s.mu.Unlock()
}

// end returns when a statement writing batch must be done: within
// Timeout (or, closing, by the end of CloseTimeout), and by the deadline
// of its first durable record, whose Record waits for it.
func (s *AuditSink) end(batch []entry, closing time.Time) time.Time {
	end := time.Now().Add(s.opts.Timeout)
	if !closing.IsZero() {
		end = closing
	}
	if d := batch[0].deadline; !d.IsZero() && d.Before(end) {
		end = d
	}
	return end
}

func rows(batch []entry) []auditRow {
	rows := make([]auditRow, len(batch))
	for i, en := range batch {
		rows[i] = en.row
	}
	return rows
}

// writeFailures is the writer's state while writes fail.
type writeFailures struct {
	backoff time.Duration
	failing time.Time // when writes started failing; zero while they succeed
	lastLog time.Time // when that was last logged
}

// resumed notes a successful write.
func (f *writeFailures) resumed(s *AuditSink) {
	if !f.failing.IsZero() {
		s.mu.Lock()
		queued := len(s.queue)
		s.mu.Unlock()
		s.log.Info("replica: audit writes resumed", "after", time.Since(f.failing).Round(time.Millisecond), "queued", queued)
		f.failing = time.Time{}
	}
	f.backoff = minBackoff
}

// pause notes a failed write and waits before the next try: a backoff,
// cut short by Close, by the end of CloseTimeout and by the deadline of
// the first waiting Record. Past the end of CloseTimeout, it drops what
// is queued and reports that the writer is done.
func (f *writeFailures) pause(s *AuditSink, err error, closeBy time.Time) (done bool) {
	now := time.Now()
	if f.failing.IsZero() {
		f.failing = now
	}
	s.mu.Lock()
	queued := len(s.queue)
	s.mu.Unlock()
	if now.Sub(f.lastLog) >= 10*time.Second {
		s.log.Warn("replica: cannot write audit records; keeping them queued and retrying",
			"queued", queued, "queue_size", s.opts.QueueSize, "error", err)
		f.lastLog = now
	}
	if !closeBy.IsZero() && !now.Before(closeBy) {
		s.mu.Lock()
		for _, en := range s.queue {
			if en.done != nil {
				en.done <- errAuditClosing
			}
		}
		s.queue = nil
		s.lastDropLog = time.Time{} // say it now
		s.dropLocked(queued, "closing: Postgres did not take them within CloseTimeout")
		s.mu.Unlock()
		return true
	}
	wait := f.backoff
	if !closeBy.IsZero() {
		wait = min(wait, time.Until(closeBy))
	}
	s.mu.Lock()
	if len(s.queue) > 0 && !s.queue[0].deadline.IsZero() {
		wait = min(wait, time.Until(s.queue[0].deadline)) // its Record is waiting for a verdict
	}
	s.mu.Unlock()
	stop := s.stop
	if !closeBy.IsZero() {
		stop = nil // closing already: only the deadline counts
	}
	t := time.NewTimer(max(wait, 0))
	select {
	case <-t.C:
	case <-stop:
		t.Stop()
	}
	f.backoff = min(2*f.backoff, maxBackoff)
	return false
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
	Queued  int    // waiting to be written, or being written
}

// Stats returns the sink's counters.
func (s *AuditSink) Stats() AuditStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return AuditStats{Written: s.written, Dropped: s.dropped, Queued: len(s.queue) + s.sending}
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
