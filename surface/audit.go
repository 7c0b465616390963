package surface

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
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

// MemorySink keeps the most recent audit records in memory. It is safe for
// concurrent use and scales with cores: a record is numbered by a shared
// ticket and written to the lane of the processor that records it (at
// most maxMemLanes lanes, one per processor, each a ring of capacity
// slots under its own lock), so concurrent Records seldom touch the same
// memory. Events merges
// the lanes by ticket and returns the newest capacity records. A lane's
// slots are allocated in chunks as it fills: a sink that records little
// stays small, and one written from n processors holds at most n ×
// capacity records.
type MemorySink struct {
	capacity int       // fixed by the first Record
	once     sync.Once // makes the ring
	ring     *memRing
	tokens   sync.Pool // *memToken: which lane a processor writes
	nextLane atomic.Uint32
}

// memRing is the shared part of a MemorySink, allocated on first use: the
// lanes, and the ticket counter on a cache line of its own (every Record
// writes it; nothing else it shares a line with should be written).
type memRing struct {
	lanes  []memLane
	laneOf [maxMemLanes]uint8 // lane % len(lanes), without a division
	_      [32]byte
	next   atomic.Uint64 // tickets issued
	_      [56]byte
}

// maxMemLanes bounds the lanes of a MemorySink.
const maxMemLanes = 8

// memLane is one ring of a MemorySink. Records enter it in ticket order:
// the ticket is taken under its lock.
type memLane struct {
	mu     sync.Mutex
	n      uint64      // records written
	pos    int         // the slot of the next record: n % capacity
	chunks []*memChunk // capacity slots, allocated as reached
	_      [16]byte    // one lane per cache line
}

// memToken is a lane assignment, kept per processor by a sync.Pool.
type memToken struct{ lane uint32 }

const memChunkSlots = 64

type memChunk [memChunkSlots]memSlot

// memSlot holds one record. Its duration pointers are kept as values
// (ms, has), so a record does not keep alive what they pointed into.
type memSlot struct {
	seq uint64 // ticket, from 1
	e   AuditEvent
	ms  [3]int64
	has uint8 // bit i: ms[i] is set
}

// NewMemorySink returns a sink that keeps the last capacity records
// (default 1000 when capacity ≤ 0).
func NewMemorySink(capacity int) *MemorySink {
	if capacity <= 0 {
		capacity = defaultMemoryCapacity
	}
	return &MemorySink{capacity: capacity}
}

func (s *MemorySink) init() { s.initLanes(min(runtime.GOMAXPROCS(0), maxMemLanes)) }

// initLanes makes the ring with n lanes (1 ≤ n ≤ maxMemLanes).
func (s *MemorySink) initLanes(n int) {
	if s.capacity <= 0 {
		s.capacity = defaultMemoryCapacity
	}
	ring := &memRing{lanes: make([]memLane, n)}
	for i := range ring.lanes {
		ring.lanes[i].chunks = make([]*memChunk, (s.capacity+memChunkSlots-1)/memChunkSlots)
	}
	for i := range ring.laneOf {
		ring.laneOf[i] = uint8(i % len(ring.lanes))
	}
	s.ring = ring
	s.tokens.New = func() any {
		return &memToken{lane: (s.nextLane.Add(1) - 1) % uint32(len(ring.lanes))}
	}
}

// Record implements AuditSink. A zero MemorySink keeps the default 1000.
func (s *MemorySink) Record(e AuditEvent) { s.record(&e, anyLane) }

// anyLane asks record to write the lane of the calling processor.
const anyLane = -1

// record is Record without copying e on the way in, to the given lane
// (0 to maxMemLanes-1, reduced modulo the lanes) or, for anyLane, to the
// calling processor's lane. The registry passes lanes it already knows (a
// pooled pipeline's), which saves finding one. It returns the lane it
// wrote, which the caller should pass next time: when the lane asked for
// is busy, record moves to a free one, so that two processors that came
// to share a lane part again.
func (s *MemorySink) record(e *AuditEvent, lane int) int {
	s.once.Do(s.init)
	ring := s.ring
	var tok *memToken
	if lane < 0 {
		tok = s.tokens.Get().(*memToken)
		lane = int(tok.lane)
	}
	lane &= maxMemLanes - 1
	l := &ring.lanes[ring.laneOf[lane]]
	if !l.mu.TryLock() {
		l, lane = ring.lockOther(lane)
		if tok != nil {
			tok.lane = uint32(lane)
		}
	}
	pos := l.pos
	if l.pos++; l.pos == s.capacity {
		l.pos = 0
	}
	c := l.chunks[pos/memChunkSlots]
	if c == nil {
		c = new(memChunk)
		l.chunks[pos/memChunkSlots] = c
	}
	l.n++
	c[pos%memChunkSlots].store(ring.next.Add(1), e)
	l.mu.Unlock()
	if tok != nil {
		s.tokens.Put(tok)
	}
	return lane
}

// lockOther locks, and returns with its number, the first free lane after
// lane, which another processor holds; when all are busy it waits for
// lane itself.
func (ring *memRing) lockOther(lane int) (*memLane, int) {
	l := &ring.lanes[ring.laneOf[lane]]
	for k := 1; k < len(ring.lanes); k++ {
		next := (lane + k) & (maxMemLanes - 1)
		if c := &ring.lanes[ring.laneOf[next]]; c != l && c.mu.TryLock() {
			return c, next
		}
	}
	l.mu.Lock()
	return l, lane
}

// store copies e into the slot, its durations by value.
func (sl *memSlot) store(seq uint64, e *AuditEvent) {
	sl.seq, sl.e, sl.has = seq, *e, 0
	if e.DurationMs == nil && e.QueueWaitMs == nil && e.ExecutionMs == nil {
		return // registrations, invocation-started records
	}
	for i, d := range [3]**int64{&sl.e.DurationMs, &sl.e.QueueWaitMs, &sl.e.ExecutionMs} {
		if *d != nil {
			sl.ms[i], sl.has = **d, sl.has|1<<i
			*d = nil
		}
	}
}

// Events returns the kept records, oldest first. A Record still in
// progress when Events is called may be missing.
func (s *MemorySink) Events() []AuditEvent {
	s.once.Do(s.init)
	var kept []memSlot
	for i := range s.ring.lanes {
		l := &s.ring.lanes[i]
		l.mu.Lock()
		for k := l.n - min(l.n, uint64(s.capacity)); k < l.n; k++ {
			pos := k % uint64(s.capacity)
			kept = append(kept, l.chunks[pos/memChunkSlots][pos%memChunkSlots])
		}
		l.mu.Unlock()
	}
	// Each lane is in ticket order already; a sort merges them.
	slices.SortFunc(kept, func(a, b memSlot) int { return cmp.Compare(a.seq, b.seq) })
	kept = kept[len(kept)-min(len(kept), s.capacity):]
	out := make([]AuditEvent, len(kept))
	ms := make([]int64, 3*len(kept))
	for i := range kept {
		sl := &kept[i]
		out[i] = sl.e
		for j, d := range [3]**int64{&out[i].DurationMs, &out[i].QueueWaitMs, &out[i].ExecutionMs} {
			if sl.has&(1<<j) != 0 {
				ms[3*i+j] = sl.ms[j]
				*d = &ms[3*i+j]
			}
		}
	}
	return out
}

// audit hands e to the registry's sink (and, in development, to the
// console sink on stderr).
func (r *Registry) audit(e AuditEvent) {
	r.auditLane(&e, 0)
}

// auditLane is audit with the MemorySink lane to write: a pooled
// pipeline's (pools are per processor), else 0, the registry's own. It
// saves the sink finding the calling processor's lane. It returns the
// lane to pass next time (the sink may have moved to a free one).
func (r *Registry) auditLane(e *AuditEvent, lane uint32) uint32 {
	if e.At.IsZero() {
		e.At = r.now()
	}
	if ms, ok := r.sink.(*MemorySink); ok {
		// The same lane modulo maxMemLanes, or the one the sink moved to;
		// never 0, which marks a pipeline without one.
		lane = lane&^(maxMemLanes-1) | uint32(ms.record(e, int(lane)))
		if lane == 0 {
			lane = maxMemLanes
		}
	} else {
		r.record(r.sink, e)
	}
	if r.console != nil {
		r.record(r.console, e)
	}
	return lane
}

// auditTo hands e to sink (a policy's own), or to the registry's sinks
// when sink is nil, recovering a panic. Records are passed by pointer
// until a sink copies them: they are large.
func (r *Registry) auditTo(sink AuditSink, e *AuditEvent) {
	if sink == nil {
		r.auditLane(e, 0)
		return
	}
	if e.At.IsZero() {
		e.At = r.now()
	}
	r.record(sink, e)
}

func (r *Registry) record(sink AuditSink, e *AuditEvent) {
	if ms, ok := sink.(*MemorySink); ok { // cannot panic: no recovery needed
		ms.record(e, anyLane)
		return
	}
	r.recordGuarded(sink, *e)
}

// recordGuarded hands e to a sink that may panic.
func (r *Registry) recordGuarded(sink AuditSink, e AuditEvent) {
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
