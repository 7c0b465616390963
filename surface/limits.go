package surface

import "time"

// Limits bounds everything the registry stores or accepts. A zero (or
// negative) field takes its default (listed per field), except where a
// field says otherwise; every limit is enforced and a
// violation is diagnosable, never silent.
type Limits struct {
	// MaxComponentDescription is the maximum component description length
	// in UTF-16 code units. Default 500.
	MaxComponentDescription int
	// MaxCapabilityDescription is the maximum capability description length
	// in UTF-16 code units. Default 300.
	MaxCapabilityDescription int
	// MaxMetaBytes is the maximum size of a meta record, in bytes of its
	// compact JSON encoding. Default 2048.
	MaxMetaBytes int
	// MaxOutputBytes is the maximum size of a handler's output, in bytes of
	// its JSON encoding. Default 32768.
	MaxOutputBytes int
	// MaxInputBytes is the maximum size of an invocation's input, in bytes
	// as sent; a larger one fails INVALID_INPUT before it is parsed.
	// Default 1048576 (1 MiB).
	MaxInputBytes int
	// MaxSchemaBytes is the maximum size of a schema, in bytes of its
	// compact JSON encoding. Default 16384.
	MaxSchemaBytes int
	// MaxSchemaDepth is the maximum nesting depth of a schema. Default 8.
	MaxSchemaDepth int
	// ObservationTimeout bounds an observation's read. Default 5s.
	ObservationTimeout time.Duration
	// ActionTimeout bounds an action's execution. Default 10s.
	ActionTimeout time.Duration
	// ProcedureTimeout bounds a procedure call. Default 30s.
	ProcedureTimeout time.Duration
	// ActionQueueDepth is how many actions may wait behind the one in
	// flight on a component instance. Default 2; negative means none.
	ActionQueueDepth int
	// MaxConcurrentObservationsPerConsumer bounds one consumer's parallel
	// reads. Default 8.
	MaxConcurrentObservationsPerConsumer int
	// MaxConcurrentObservationsTotal bounds parallel reads of all
	// consumers. Default 32.
	MaxConcurrentObservationsTotal int
	// MaxQueuedObservationsPerConsumer bounds one consumer's waiting reads.
	// Default 8; negative means none.
	MaxQueuedObservationsPerConsumer int
	// DedupeCacheSize bounds the idempotency cache. Default 200 entries.
	// Eviction follows insertion order across the whole cache: the
	// DedupeCacheSize most recent keys are kept (within their TTL), and
	// entries still in flight are never evicted.
	DedupeCacheSize int
	// DedupeCacheTTL is how long a terminal result is replayed. Default 10m.
	DedupeCacheTTL time.Duration
	// TombstoneSize bounds the remembered unregistrations. Default 100.
	TombstoneSize int
	// TombstoneTTL is how long an unregistration is remembered. Default 5m.
	TombstoneTTL time.Duration
	// ConfirmationTTL is how long a confirmation request stays pending.
	// Default 2m.
	ConfirmationTTL time.Duration
	// MaxPendingConfirmations bounds the pending confirmation store.
	// Default 32.
	MaxPendingConfirmations int
	// MaxPendingConfirmationsPerConsumer bounds one consumer's share of
	// the store, so one consumer cannot fill it for the others. Default 8.
	MaxPendingConfirmationsPerConsumer int
	// MaxGrants bounds the active standing grants of the registry.
	// Default 64.
	MaxGrants int
	// MaxGrantTTL caps how long any standing grant lasts, whatever the
	// capability's GrantRule says. Default 1h.
	MaxGrantTTL time.Duration
}

func (l Limits) withDefaults() Limits {
	depth := func(p *int, v int) {
		switch {
		case *p == 0:
			*p = v
		case *p < 0:
			*p = 0
		}
	}
	def(&l.MaxComponentDescription, 500)
	def(&l.MaxCapabilityDescription, 300)
	def(&l.MaxMetaBytes, 2048)
	def(&l.MaxOutputBytes, 32768)
	def(&l.MaxInputBytes, 1<<20)
	def(&l.MaxSchemaBytes, 16384)
	def(&l.MaxSchemaDepth, 8)
	def(&l.ObservationTimeout, 5*time.Second)
	def(&l.ActionTimeout, 10*time.Second)
	def(&l.ProcedureTimeout, 30*time.Second)
	depth(&l.ActionQueueDepth, 2)
	def(&l.MaxConcurrentObservationsPerConsumer, 8)
	def(&l.MaxConcurrentObservationsTotal, 32)
	depth(&l.MaxQueuedObservationsPerConsumer, 8)
	def(&l.DedupeCacheSize, 200)
	def(&l.DedupeCacheTTL, 10*time.Minute)
	def(&l.TombstoneSize, 100)
	def(&l.TombstoneTTL, 5*time.Minute)
	def(&l.ConfirmationTTL, 2*time.Minute)
	def(&l.MaxPendingConfirmations, 32)
	def(&l.MaxPendingConfirmationsPerConsumer, 8)
	def(&l.MaxGrants, 64)
	def(&l.MaxGrantTTL, time.Hour)
	return l
}

// def sets *p to v when *p is zero or negative.
func def[T int | time.Duration](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}
