package surface

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
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

// AuditSink receives audit records. Record is called synchronously from
// the registry's goroutines, possibly concurrently, and never while the
// registry holds a lock; it must be fast and must not block. A panic in
// Record is recovered and logged.
type AuditSink interface {
	Record(AuditEvent)
}

// defaultMemoryCapacity is the default MemorySink capacity.
const defaultMemoryCapacity = 1000

// MemorySink keeps the most recent audit records in memory: a ring of
// exactly its capacity, under one lock. It is safe for concurrent use.
type MemorySink struct {
	mu       sync.Mutex
	capacity int         // fixed by the first Record
	ring     []memRecord // made on the first record; fills to capacity, then wraps
	next     int         // where the next record goes once the ring is full: its oldest
}

// memRecord is one kept record. Its durations are kept as values, so a
// record shares no memory with the caller's.
type memRecord struct {
	e   AuditEvent // without its duration pointers
	ms  [3]int64   // DurationMs, QueueWaitMs, ExecutionMs
	has [3]bool
}

// NewMemorySink returns a sink that keeps the last capacity records
// (default 1000 when capacity ≤ 0).
func NewMemorySink(capacity int) *MemorySink {
	return &MemorySink{capacity: capacity}
}

// Record implements AuditSink. A zero MemorySink keeps the default 1000.
func (s *MemorySink) Record(e AuditEvent) {
	rec := memRecord{e: e}
	for i, d := range [3]**int64{&rec.e.DurationMs, &rec.e.QueueWaitMs, &rec.e.ExecutionMs} {
		if *d != nil {
			rec.ms[i], rec.has[i], *d = **d, true, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capacity <= 0 {
		s.capacity = defaultMemoryCapacity
	}
	if s.ring == nil {
		s.ring = make([]memRecord, 0, s.capacity)
	}
	if len(s.ring) < s.capacity {
		s.ring = append(s.ring, rec)
		return
	}
	s.ring[s.next] = rec
	s.next = (s.next + 1) % s.capacity
}

// Events returns the kept records, oldest first.
func (s *MemorySink) Events() []AuditEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]AuditEvent, 0, len(s.ring))
	for _, part := range [2][]memRecord{s.ring[s.next:], s.ring[:s.next]} {
		for _, rec := range part {
			e := rec.e
			for i, d := range [3]**int64{&e.DurationMs, &e.QueueWaitMs, &e.ExecutionMs} {
				if rec.has[i] {
					*d = new(rec.ms[i])
				}
			}
			out = append(out, e)
		}
	}
	return out
}

// audit hands e to the registry's sink (and, in development, to the
// console sink on stderr).
func (r *Registry) audit(e AuditEvent) {
	if e.At.IsZero() {
		e.At = r.now()
	}
	r.record(r.sink, e)
	if r.console != nil {
		r.record(r.console, e)
	}
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
	r.record(sink, e)
}

// record hands e to a sink, recovering a panic: a failing sink loses the
// record, never the call.
func (r *Registry) record(sink AuditSink, e AuditEvent) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("surface: audit sink panicked", "type", e.Type, "panic", fmt.Sprint(p))
		}
	}()
	sink.Record(e)
}

// SlogSink writes audit records as log/slog records at level Info, one
// attribute per field. It suits operators who ship logs: point the logger
// at stderr, a file or a collector.
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

// Record implements AuditSink.
func (s *SlogSink) Record(e AuditEvent) {
	attrs := make([]slog.Attr, 0, 12)
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
	add("actor", e.Actor)
	for k, v := range map[string]*int64{"durationMs": e.DurationMs, "queueWaitMs": e.QueueWaitMs, "executionMs": e.ExecutionMs} {
		if v != nil {
			attrs = append(attrs, slog.Int64(k, *v))
		}
	}
	if e.Payload != nil {
		attrs = append(attrs, slog.String("input", string(e.Payload.Input)), slog.String("output", string(e.Payload.Output)))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", attrs...)
}

// AsyncSink hands records to another sink on its own goroutine, so a slow
// sink (a database, a network shipper) cannot stall invocations. When its
// buffer is full it drops records and counts them, never blocking the
// caller. Close flushes and stops it.
type AsyncSink struct {
	inner   AuditSink
	ch      chan AuditEvent
	done    chan struct{}
	once    sync.Once
	mu      sync.RWMutex // Record (read) vs Close (write)
	closed  bool
	dropped atomic.Uint64
}

// NewAsyncSink starts an AsyncSink in front of inner with a buffer of size
// records (default 1024 when size ≤ 0).
func NewAsyncSink(inner AuditSink, size int) *AsyncSink {
	if size <= 0 {
		size = 1024
	}
	s := &AsyncSink{inner: inner, ch: make(chan AuditEvent, size), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for e := range s.ch {
			func() {
				defer func() { _ = recover() }() // a panicking sink loses one record, not the goroutine
				s.inner.Record(e)
			}()
		}
	}()
	return s
}

// Record implements AuditSink without blocking.
func (s *AsyncSink) Record(e AuditEvent) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.dropped.Add(1)
		return
	}
	select {
	case s.ch <- e:
	default:
		s.dropped.Add(1)
	}
}

// Dropped returns how many records were dropped because the buffer was
// full or the sink closed.
func (s *AsyncSink) Dropped() uint64 { return s.dropped.Load() }

// Close delivers the buffered records to the inner sink and stops the
// goroutine. It is idempotent.
func (s *AsyncSink) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.ch)
		s.mu.Unlock()
	})
	<-s.done
	return nil
}
