package surface

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
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
}

// AuditPayload is the input and output recorded at audit level full.
type AuditPayload struct {
	Input  JSONText `json:"input,omitempty"`
	Output JSONText `json:"output,omitempty"`
}

// MarshalJSON encodes the record with an ISO-8601 millisecond timestamp.
func (e AuditEvent) MarshalJSON() ([]byte, error) {
	type plain AuditEvent
	return json.Marshal(struct {
		At string `json:"at"`
		plain
	}{e.At.UTC().Format(timeLayout), plain(e)})
}

func millis(d time.Duration) *int64 {
	ms := d.Milliseconds()
	return &ms
}

// AuditSink receives audit records. Record is called synchronously from
// the registry's goroutines, possibly concurrently, and never while the
// registry holds a lock; it must be fast and must not block. A panic in
// Record is recovered and logged.
type AuditSink interface {
	Record(AuditEvent)
}

// MemorySink keeps the most recent audit records in memory. It is safe for
// concurrent use.
type MemorySink struct {
	mu       sync.Mutex
	capacity int
	events   []AuditEvent // a ring once full
	next     int          // oldest record once full
}

// NewMemorySink returns a sink that keeps the last capacity records
// (default 1000 when capacity ≤ 0).
func NewMemorySink(capacity int) *MemorySink {
	if capacity <= 0 {
		capacity = 1000
	}
	return &MemorySink{capacity: capacity}
}

// Record implements AuditSink.
func (s *MemorySink) Record(e AuditEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) < s.capacity {
		s.events = append(s.events, e)
		return
	}
	s.events[s.next] = e
	s.next = (s.next + 1) % s.capacity
}

// Events returns the kept records, oldest first.
func (s *MemorySink) Events() []AuditEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Concat(s.events[s.next:], s.events[:s.next])
}

// audit hands e to the sink, recovering a panic.
func (r *Registry) audit(e AuditEvent) {
	if r.sink == nil {
		return
	}
	if e.At.IsZero() {
		e.At = r.now()
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("surface: audit sink panicked", "type", e.Type, "panic", fmt.Sprint(p))
		}
	}()
	r.sink.Record(e)
}
