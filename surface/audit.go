package surface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// AuditType is the kind of an audit record.
type AuditType string

// Audit record types (spec 06 §Audit).
const (
	AuditRegistration          AuditType = "registration"
	AuditUnregistration        AuditType = "unregistration"
	AuditRegistrationRejected  AuditType = "registration-rejected"
	AuditInvocationStarted     AuditType = "invocation-started"
	AuditInvocationSettled     AuditType = "invocation-settled"
	AuditConfirmationRequested AuditType = "confirmation-requested"
	AuditConfirmationApproved  AuditType = "confirmation-approved"
	AuditConfirmationDenied    AuditType = "confirmation-denied"
	AuditConfirmationExpired   AuditType = "confirmation-expired"
	AuditConfirmationConsumed  AuditType = "confirmation-consumed"
	AuditLateSettlement        AuditType = "late-settlement"
	AuditCollisionSuspected    AuditType = "collision-suspected"
	// Standing grants (see [Grants]): made, refused at creation, used by
	// a call (as its execution starts), revoked, expired (its TTL, or the
	// registry closing). Each names the grant (but a refused one, which
	// has no id), its capability and consumer scope, and the actor the
	// host named; grant-used also the invocation.
	AuditGrantCreated AuditType = "grant-created"
	AuditGrantRefused AuditType = "grant-refused"
	AuditGrantUsed    AuditType = "grant-used"
	AuditGrantRevoked AuditType = "grant-revoked"
	AuditGrantExpired AuditType = "grant-expired"
)

// ResultStatus is "ok" or "error".
type ResultStatus string

// Result statuses.
const (
	StatusOK    ResultStatus = "ok"
	StatusError ResultStatus = "error"
)

// AuditEvent is one audit record. Optional fields are empty or nil when
// they do not apply; the JSON encoding omits them.
type AuditEvent struct {
	At             time.Time `json:"at"`
	Type           AuditType `json:"type"`
	CapabilityID   string    `json:"capabilityId,omitempty"`
	RegistrationID string    `json:"registrationId,omitempty"`
	InvocationID   string    `json:"invocationId,omitempty"`
	// ConfirmationID is the confirmation a confirmation-* record is about.
	ConfirmationID string `json:"confirmationId,omitempty"`
	// ConsumerID is the consumer key (kind:id) of the caller.
	ConsumerID string       `json:"consumerId,omitempty"`
	Status     ResultStatus `json:"status,omitempty"`
	Code       Code         `json:"code,omitempty"`
	// DurationMs, QueueWaitMs and ExecutionMs are milliseconds; nil when
	// the phase did not run. Queue wait and execution are separate: time
	// waiting for a concurrency slot versus time inside the handler.
	DurationMs  *int64 `json:"durationMs,omitempty"`
	QueueWaitMs *int64 `json:"queueWaitMs,omitempty"`
	ExecutionMs *int64 `json:"executionMs,omitempty"`
	// Payload holds the input and output of capabilities audited at level
	// full.
	Payload *AuditPayload `json:"payload,omitempty"`
	// Actor is who resolved a confirmation, when the host said.
	Actor string `json:"actor,omitempty"`
	// Reason is the reason a user gave for denying a confirmation
	// ([Resolution.Reason]), or the [GrantErrorCode] of a refused grant.
	// It is for operators: no agent ever sees it.
	Reason string `json:"reason,omitempty"`
	// GrantID is the standing grant a grant-* record is about, and on an
	// invocation-settled record the grant that let the call skip its
	// question.
	GrantID string `json:"grantId,omitempty"`
}

// AuditPayload is the input and output recorded at audit level full.
type AuditPayload struct {
	Input  JSONText `json:"input,omitempty"`
	Output JSONText `json:"output,omitempty"`
	// Truncated is set when a part was dropped for exceeding
	// Limits.MaxOutputBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// MarshalJSON encodes the record with an ISO-8601 millisecond timestamp.
func (e AuditEvent) MarshalJSON() ([]byte, error) {
	type plain AuditEvent
	return json.Marshal(struct {
		At string `json:"at"`
		plain
	}{e.At.UTC().Format(timeLayout), plain(e)})
}

// AuditSink receives audit records, as [slog.Handler] receives log
// records.
//
// The registry calls Record synchronously, possibly from several
// goroutines at once, never while it holds a lock. ctx carries the values
// of the call that caused the record (an invocation's, for its records)
// but is never cancelled: cancelling a call does not stop its record. A
// sink must be fast and must not block; a slow destination belongs behind
// an [AsyncSink]. An error means the record was lost: the registry logs
// it and goes on, as it does when Record panics.
type AuditSink interface {
	Record(ctx context.Context, e AuditEvent) error
}

// defaultMemoryCapacity is the default MemorySink capacity.
const defaultMemoryCapacity = 1000

// MemorySink keeps the most recent audit records in memory, at most its
// capacity, dropping the oldest. It is safe for concurrent use.
type MemorySink struct {
	mu       sync.Mutex
	capacity int         // fixed by the first Record
	ring     []memRecord // grows with use to capacity, then wraps
	next     int         // where the next record goes once the ring is full: its oldest
}

// memRecord is one kept record in compact form, sharing no memory with
// the caller's: the fields of the registry's invocation and lifecycle
// records inline, their type, status and code as positions in the
// constant tables below, durations as values. A record with anything
// else (a confirmation id, an actor, a payload, a type, status or code
// outside the tables, a duration beyond 24 days) is kept whole in full.
type memRecord struct {
	at             time.Time
	capabilityID   string
	registrationID string
	invocationID   string
	consumerID     string
	ms             [3]int32 // DurationMs, QueueWaitMs, ExecutionMs, when has says so
	typ            uint8    // position in auditTypes
	status         uint8    // position in resultStatuses
	code           uint8    // position in auditCodes
	has            uint8    // bit i: ms[i] is set
	full           *AuditEvent
}

// The values a compact record encodes by position; position 0 is empty.
var (
	auditTypes = [...]AuditType{"", AuditRegistration, AuditUnregistration, AuditRegistrationRejected,
		AuditInvocationStarted, AuditInvocationSettled, AuditConfirmationRequested, AuditConfirmationApproved,
		AuditConfirmationDenied, AuditConfirmationExpired, AuditConfirmationConsumed, AuditLateSettlement,
		AuditCollisionSuspected}
	resultStatuses = [...]ResultStatus{"", StatusOK, StatusError}
	auditCodes     = [...]Code{"", CodeCapabilityNotFound, CodeCapabilityNotAvailable, CodeAmbiguousInstance,
		CodeComponentUnmounted, CodeStaleCapability, CodeInvocationConflict, CodeInvalidInput,
		CodeNotAuthenticated, CodeNotAuthorized, CodePreconditionFailed, CodeConfirmationRequired,
		CodeConfirmationInvalid, CodeRateLimited, CodeTimeout, CodeCancelled, CodeExecutionFailed}
)

// compact returns e as a kept record.
func compact(e AuditEvent) memRecord {
	typ := slices.Index(auditTypes[:], e.Type)
	status := slices.Index(resultStatuses[:], e.Status)
	code := slices.Index(auditCodes[:], e.Code)
	rec := memRecord{at: e.At, capabilityID: e.CapabilityID, registrationID: e.RegistrationID,
		invocationID: e.InvocationID, consumerID: e.ConsumerID, typ: uint8(typ), status: uint8(status), code: uint8(code)}
	fits := typ >= 0 && status >= 0 && code >= 0 && e.ConfirmationID == "" && e.Actor == "" && e.Reason == "" && e.GrantID == "" && e.Payload == nil
	for i, d := range [3]*int64{e.DurationMs, e.QueueWaitMs, e.ExecutionMs} {
		if d != nil {
			fits = fits && *d >= math.MinInt32 && *d <= math.MaxInt32
			rec.ms[i], rec.has = int32(*d), rec.has|1<<i
		}
	}
	if fits {
		return rec
	}
	full := e
	full.ownDurations()
	return memRecord{full: &full}
}

// ownDurations points e's durations at copies of their own.
func (e *AuditEvent) ownDurations() {
	for _, d := range [3]**int64{&e.DurationMs, &e.QueueWaitMs, &e.ExecutionMs} {
		if *d != nil {
			*d = new(**d)
		}
	}
}

// event returns the record as the caller's own AuditEvent.
func (rec *memRecord) event() AuditEvent {
	if rec.full != nil {
		e := *rec.full
		e.ownDurations()
		return e
	}
	e := AuditEvent{At: rec.at, Type: auditTypes[rec.typ], CapabilityID: rec.capabilityID,
		RegistrationID: rec.registrationID, InvocationID: rec.invocationID, ConsumerID: rec.consumerID,
		Status: resultStatuses[rec.status], Code: auditCodes[rec.code]}
	for i, d := range [3]**int64{&e.DurationMs, &e.QueueWaitMs, &e.ExecutionMs} {
		if rec.has&(1<<i) != 0 {
			*d = new(int64(rec.ms[i]))
		}
	}
	return e
}

// NewMemorySink returns a sink that keeps the last capacity records
// (default 1000 when capacity ≤ 0).
func NewMemorySink(capacity int) *MemorySink {
	return &MemorySink{capacity: capacity}
}

// Record implements AuditSink; it never fails. A zero MemorySink keeps
// the default 1000.
func (s *MemorySink) Record(_ context.Context, e AuditEvent) error {
	rec := compact(e)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capacity <= 0 {
		s.capacity = defaultMemoryCapacity
	}
	if len(s.ring) < s.capacity {
		if len(s.ring) == cap(s.ring) { // grow by doubling, never past capacity
			s.ring = append(make([]memRecord, 0, min(max(2*len(s.ring), 8), s.capacity)), s.ring...)
		}
		s.ring = append(s.ring, rec)
		return nil
	}
	s.ring[s.next] = rec
	s.next = (s.next + 1) % s.capacity
	return nil
}

// Events returns the kept records, oldest first.
func (s *MemorySink) Events() []AuditEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]AuditEvent, 0, len(s.ring))
	for _, part := range [2][]memRecord{s.ring[s.next:], s.ring[:s.next]} {
		for i := range part {
			out = append(out, part[i].event())
		}
	}
	return out
}

// audit hands e to the registry's sink (and, in development, to the
// console on stderr).
func (r *Registry) audit(e AuditEvent) { r.auditCtx(context.Background(), e) }

// auditCtx is audit with the context of the call that caused the record.
func (r *Registry) auditCtx(ctx context.Context, e AuditEvent) {
	if e.At.IsZero() {
		e.At = r.now()
	}
	if ctx.Done() != nil { // a context that can end; Background cannot
		ctx = context.WithoutCancel(ctx)
	}
	r.record(ctx, r.opts.Audit, e)
	if r.console != nil {
		r.record(ctx, r.console, e)
	}
}

// auditsRefusal reports whether a settled call is an observation refused
// before its handler ran that Options.AuditObservationRefusals audits.
func (r *Registry) auditsRefusal(a *attempt, res Result) bool {
	return r.opts.AuditObservationRefusals && res.Error != nil && !a.executed && a.cap != nil && a.cap.def.kind == KindObservation
}

// auditTo hands e to sink (a policy's own), or to the registry's sinks
// when sink is nil.
func (r *Registry) auditTo(sink AuditSink, e AuditEvent) {
	if sink == nil {
		r.audit(e)
		return
	}
	if e.At.IsZero() {
		e.At = r.now()
	}
	r.record(context.Background(), sink, e)
}

// record hands e to a sink. A failing or panicking sink loses the record,
// never the call: the failure is logged.
func (r *Registry) record(ctx context.Context, sink AuditSink, e AuditEvent) {
	defer func() {
		if p := recover(); p != nil {
			r.opts.Logger.Error("surface: audit sink panicked; the record is lost",
				"type", e.Type, "capabilityId", e.CapabilityID, "invocationId", e.InvocationID, "panic", fmt.Sprint(p))
		}
	}()
	if err := sink.Record(ctx, e); err != nil {
		r.opts.Logger.Error("surface: audit sink failed; the record is lost",
			"type", e.Type, "capabilityId", e.CapabilityID, "invocationId", e.InvocationID, "error", err)
	}
}

// SlogSink writes audit records as log/slog records at level Info, one
// attribute per field, in a fixed order. It suits operators who ship logs:
// point the logger at stderr, a file or a collector. Record returns when
// the logger's handler does: put a handler that may block (a network
// shipper) behind an [AsyncSink].
type SlogSink struct {
	log *slog.Logger
}

// NewSlogSink returns a sink writing to logger; nil means a text handler
// on stderr (never stdout, which may carry a protocol such as MCP stdio).
func NewSlogSink(logger *slog.Logger) *SlogSink {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return &SlogSink{log: logger}
}

// Record implements AuditSink. The message is "audit"; the attributes
// come in a fixed order: type, at, capabilityId, registrationId,
// invocationId, confirmationId, consumerId, status, code, durationMs,
// queueWaitMs, executionMs, actor, reason, grantId, then input, output
// and truncated for a payload. Empty fields are left out.
func (s *SlogSink) Record(ctx context.Context, e AuditEvent) error {
	s.log.LogAttrs(ctx, slog.LevelInfo, "audit", e.attrs()...)
	return nil
}

// attrs returns the record's fields as log attributes, in the order
// SlogSink documents.
func (e AuditEvent) attrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs, slog.String("type", string(e.Type)), slog.Time("at", e.At))
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	add("capabilityId", e.CapabilityID)
	add("registrationId", e.RegistrationID)
	add("invocationId", e.InvocationID)
	add("confirmationId", e.ConfirmationID)
	add("consumerId", e.ConsumerID)
	add("status", string(e.Status))
	add("code", string(e.Code))
	for _, d := range [...]struct {
		k string
		v *int64
	}{{"durationMs", e.DurationMs}, {"queueWaitMs", e.QueueWaitMs}, {"executionMs", e.ExecutionMs}} {
		if d.v != nil {
			attrs = append(attrs, slog.Int64(d.k, *d.v))
		}
	}
	add("actor", e.Actor)
	add("reason", e.Reason)
	add("grantId", e.GrantID)
	if p := e.Payload; p != nil {
		add("input", string(p.Input))
		add("output", string(p.Output))
		if p.Truncated {
			attrs = append(attrs, slog.Bool("truncated", true))
		}
	}
	return attrs
}

// ErrAuditDropped is the error of an [AsyncSink] that could not take a
// record: its buffer was full, or it was closed.
var ErrAuditDropped = errors.New("surface: audit record dropped")

// AsyncSink hands records to another sink on its own goroutine, so a slow
// sink (a database, a network shipper) cannot stall invocations. When its
// buffer is full it drops the record and returns [ErrAuditDropped], never
// blocking the caller. Close flushes and stops it.
type AsyncSink struct {
	inner   AuditSink
	ch      chan asyncRecord
	done    chan struct{}
	mu      sync.RWMutex // Record (read) vs Close (write)
	closed  bool
	dropped atomic.Uint64
	failed  atomic.Uint64
}

type asyncRecord struct {
	ctx context.Context // never cancelled
	e   AuditEvent
}

// NewAsyncSink starts an AsyncSink in front of inner with a buffer of size
// records (default 1024 when size ≤ 0).
func NewAsyncSink(inner AuditSink, size int) *AsyncSink {
	if size <= 0 {
		size = 1024
	}
	s := &AsyncSink{inner: inner, ch: make(chan asyncRecord, size), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for rec := range s.ch {
			s.deliver(rec)
		}
	}()
	return s
}

// deliver hands one record to the inner sink; a failing or panicking
// sink loses that record, not the goroutine.
func (s *AsyncSink) deliver(rec asyncRecord) {
	defer func() {
		if recover() != nil {
			s.failed.Add(1)
		}
	}()
	if s.inner.Record(rec.ctx, rec.e) != nil {
		s.failed.Add(1)
	}
}

// Record implements AuditSink without blocking. It returns
// ErrAuditDropped when the buffer is full or the sink is closed.
func (s *AsyncSink) Record(ctx context.Context, e AuditEvent) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.closed {
		select {
		case s.ch <- asyncRecord{context.WithoutCancel(ctx), e}:
			return nil
		default:
		}
	}
	s.dropped.Add(1)
	return ErrAuditDropped
}

// Dropped returns how many records were dropped because the buffer was
// full or the sink closed.
func (s *AsyncSink) Dropped() uint64 { return s.dropped.Load() }

// Failed returns how many records the inner sink failed to take (it
// returned an error or panicked).
func (s *AsyncSink) Failed() uint64 { return s.failed.Load() }

// Close delivers the buffered records to the inner sink and stops the
// goroutine. It is idempotent.
func (s *AsyncSink) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
	<-s.done
	return nil
}

// consoleSink is the development audit console: one line per record on
// the diagnostic stream, "[agent-surface audit]" then the record's fields
// as key=value in SlogSink's order.
type consoleSink struct {
	mu sync.Mutex
	w  io.Writer
}

// consolePrefix begins every line of the development audit console.
const consolePrefix = "[agent-surface audit]"

// Record implements AuditSink.
func (c *consoleSink) Record(_ context.Context, e AuditEvent) error {
	b := make([]byte, 0, 256)
	b = append(b, consolePrefix...)
	for _, a := range e.attrs() {
		b = append(b, ' ')
		b = append(b, a.Key...)
		b = append(b, '=')
		var v string
		if a.Value.Kind() == slog.KindTime {
			v = a.Value.Time().UTC().Format(timeLayout)
		} else {
			v = a.Value.String()
		}
		if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '=' || !unicode.IsPrint(r) }) {
			b = strconv.AppendQuote(b, v)
		} else {
			b = append(b, v...)
		}
	}
	b = append(b, '\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.w.Write(b)
	return err
}
