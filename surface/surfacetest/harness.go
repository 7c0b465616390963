package surfacetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// AuditCapacity is how many audit records the memory sink of a
// harness-created registry keeps.
const AuditCapacity = 5000

// Options configure a Surface. The zero value, like a nil *Options, is a
// registry the harness creates and owns, in the test environment, with an
// empty host context, used as Consumer().
type Options struct {
	// Registry, if set, is the registry to test: the harness wraps it,
	// records its events from New on, and neither owns nor closes it.
	// RegistryOptions and Host must then be unset (the registry has its
	// own), and Surface.As is refused.
	Registry *surface.Registry
	// RegistryOptions configure the registry the harness creates when
	// Registry is nil. A zero Environment means surface.EnvTest. Context
	// must be nil: the harness supplies the host context (Host, As). Audit,
	// if set, receives every record as well as the harness's sink.
	RegistryOptions *surface.Options
	// Host is the initial host context of a harness-created registry (the
	// user, tenant, … that policies and handlers see). Nil means empty.
	// New copies it.
	Host map[string]any
	// Consumer is who the harness snapshots and invokes as. The zero value
	// means Consumer(), {id: "test", kind: "test"}; for the anonymous
	// embedded consumer, set {Kind: surface.ConsumerEmbedded}.
	Consumer surface.Consumer
	// Audit is the memory sink that Surface.AuditLog reads. For a
	// harness-created registry, nil means a new sink of AuditCapacity
	// records. For a wrapped registry, pass the sink that registry records
	// into; if nil, AuditLog fails the test.
	Audit *surface.MemorySink
}

// Surface is a test harness around one registry, the Go counterpart of
// the reference's createTestSurface: it snapshots and invokes as a test
// consumer, resolves registration ids as an adapter would, checks
// observations, drives confirmations, switches the host context, and
// records every event and audit record. Make one with New.
//
// A Surface is safe for concurrent use, but its methods fail the test
// through the testing.TB given to New, so call those that may fail from
// the test's goroutine only, as with tb.Fatal.
type Surface struct {
	tb       testing.TB
	reg      *surface.Registry
	owned    bool
	consumer surface.Consumer
	audit    *surface.MemorySink

	hostMu sync.Mutex
	host   map[string]any // never changed in place: As replaces it

	events      Recorder
	unsubscribe func()
	closeOnce   sync.Once
}

// New returns a harness for the test. Without Options.Registry it creates
// a registry (Options.RegistryOptions) whose host context the harness
// controls and whose audit records it keeps; it closes that registry when
// the test ends, or at Close. New fails the test on contradictory options.
func New(tb testing.TB, opts *Options) *Surface {
	tb.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Surface{tb: tb, consumer: o.Consumer, audit: o.Audit}
	if isZeroConsumer(s.consumer) {
		s.consumer = Consumer()
	}
	if o.Registry != nil {
		if o.RegistryOptions != nil || o.Host != nil {
			tb.Fatalf("surfacetest.New: Options.Registry is set: RegistryOptions and Host configure a registry the harness creates")
		}
		s.reg = o.Registry
	} else {
		var ro surface.Options
		if o.RegistryOptions != nil {
			ro = *o.RegistryOptions
		}
		if ro.Context != nil {
			tb.Fatalf("surfacetest.New: RegistryOptions.Context is set: the harness supplies the host context; use Options.Host and Surface.As")
		}
		ro.Environment = cmp.Or(ro.Environment, surface.EnvTest)
		s.host = maps.Clone(o.Host)
		ro.Context = s.hostContext
		if s.audit == nil {
			s.audit = surface.NewMemorySink(AuditCapacity)
		}
		if ro.Audit != nil {
			ro.Audit = teeSink{s.audit, ro.Audit}
		} else {
			ro.Audit = s.audit
		}
		s.reg = surface.New(&ro)
		s.owned = true
	}
	s.unsubscribe = s.reg.Subscribe(s.events.add)
	tb.Cleanup(s.Close)
	return s
}

// isZeroConsumer reports whether c is the zero Consumer.
func isZeroConsumer(c surface.Consumer) bool {
	return c.ID == "" && c.Kind == "" && len(c.Grants) == 0
}

// hostContext is the Options.Context of a harness-created registry: a
// copy of the current host, so that a handler changing it changes
// nothing for the next call.
func (s *Surface) hostContext() map[string]any {
	s.hostMu.Lock()
	host := s.host
	s.hostMu.Unlock()
	if host == nil {
		return map[string]any{}
	}
	return maps.Clone(host)
}

// Registry returns the registry under test.
func (s *Surface) Registry() *surface.Registry { return s.reg }

// Consumer returns the consumer the harness acts as.
func (s *Surface) Consumer() surface.Consumer { return s.consumer }

// Register registers c and fails the test unless it went live, as
// MustRegister does.
func (s *Surface) Register(c surface.Component) *surface.Handle {
	s.tb.Helper()
	return MustRegister(s.tb, s.reg, c)
}

// Snapshot returns the registry's snapshot for opts.Consumer or, when it
// is the zero value, for the harness's consumer. It implements Snapshotter.
func (s *Surface) Snapshot(opts surface.SnapshotOptions) surface.Snapshot {
	opts.Consumer = s.consumerOr(opts.Consumer)
	return s.reg.Snapshot(opts)
}

// Explain returns the registry's explanation for opts.Consumer or, when
// it is the zero value, for the harness's consumer: why each capability is
// exposed, unavailable or hidden, policy by policy.
func (s *Surface) Explain(opts surface.SnapshotOptions) surface.Explanation {
	opts.Consumer = s.consumerOr(opts.Consumer)
	return s.reg.Explain(opts)
}

func (s *Surface) consumerOr(c surface.Consumer) surface.Consumer {
	if isZeroConsumer(c) {
		return s.consumer
	}
	return c
}

// InvokeOptions are the optional parts of Surface.Invoke's request.
type InvokeOptions struct {
	// InstanceID picks the instance when several are live.
	InstanceID string
	// RegistrationID is the staleness token to send. Empty means the
	// registration id of the only live listing of the capability (on
	// InstanceID, if set) in the consumer's snapshot, as an adapter sends
	// after discovery; with none or several, none is sent and the registry
	// answers (CAPABILITY_NOT_FOUND, AMBIGUOUS_INSTANCE, …). Pass a
	// captured one (CaptureRef) to test staleness.
	RegistrationID string
	// SurfaceVersion is the version hint to send, if any.
	SurfaceVersion string
	// ConfirmationID is the confirmation evidence to present, if any.
	ConfirmationID string
	// InvocationID is the idempotency key. Empty means a fresh one.
	InvocationID string
	// Consumer is who calls. The zero value means the harness's consumer.
	Consumer surface.Consumer
	// Timeout overrides the capability's timeout, if not zero.
	Timeout time.Duration
}

// Invoke calls capabilityID with input marshalled to JSON (nil for none;
// a json.RawMessage is sent as it is, once checked to be JSON) and returns
// the result, whatever it is: check it with RequireOK, RequireFailWith or
// RequireCode. The call's context is tb.Context(), which ends when the
// test does. Invoke fails the test only if input cannot be marshalled.
func (s *Surface) Invoke(capabilityID string, input any, opts InvokeOptions) surface.Result {
	s.tb.Helper()
	consumer := s.consumerOr(opts.Consumer)
	inv := surface.Invocation{
		InvocationID:   opts.InvocationID,
		CapabilityID:   capabilityID,
		InstanceID:     opts.InstanceID,
		RegistrationID: opts.RegistrationID,
		SurfaceVersion: opts.SurfaceVersion,
		ConfirmationID: opts.ConfirmationID,
	}
	if input != nil {
		raw, err := json.Marshal(input)
		if err != nil {
			s.tb.Fatalf("Invoke(%s): marshal input: %v", capabilityID, err)
		}
		inv.Input = raw
	}
	if inv.RegistrationID == "" {
		found := listings(s.reg.Snapshot(surface.SnapshotOptions{Consumer: consumer}), capabilityID, opts.InstanceID)
		if len(found) == 1 {
			inv.RegistrationID = found[0].registrationID
		}
	}
	return s.reg.Invoke(s.context(), inv, surface.InvokeOptions{Consumer: consumer, Timeout: opts.Timeout})
}

// context is the context of the harness's calls.
func (s *Surface) context() context.Context { return s.tb.Context() }

// Observe reads the observation capabilityID (on instanceID, if not "")
// as the harness's consumer and returns its output. It fails the test if
// capabilityID names a capability that is not an observation, if the read
// fails, or if the surface version moved during the read: an observation
// must not change the surface.
func (s *Surface) Observe(capabilityID, instanceID string) surface.JSONText {
	s.tb.Helper()
	inv := surface.Invocation{CapabilityID: capabilityID, InstanceID: instanceID}
	found := listings(s.reg.Snapshot(surface.SnapshotOptions{Consumer: s.consumer}), capabilityID, instanceID)
	for _, l := range found {
		if l.kind != surface.KindObservation {
			s.tb.Fatalf("Observe(%s): it is %s %s, not an observation", describe(capabilityID, instanceID), article(l.kind), l.kind)
		}
	}
	if len(found) == 1 {
		inv.RegistrationID = found[0].registrationID
	}
	before := s.reg.Version()
	res := s.reg.Invoke(s.context(), inv, surface.InvokeOptions{Consumer: s.consumer})
	after := s.reg.Version()
	if res.Status != surface.StatusOK || res.Error != nil {
		b, _ := json.Marshal(res)
		s.tb.Fatalf("Observe(%s) failed: %s", describe(capabilityID, instanceID), b)
	}
	if before != after || res.SurfaceChanged {
		s.tb.Fatalf("Observe(%s): the surface version moved during the read (%s to %s); observations must not change the surface",
			describe(capabilityID, instanceID), before, after)
	}
	return res.Output
}

func article(k surface.Kind) string {
	if strings.HasPrefix(string(k), "a") || strings.HasPrefix(string(k), "o") {
		return "an"
	}
	return "a"
}

// ObserveAs is Surface.Observe decoding the output into a T. It also
// fails the test if the output does not decode.
func ObserveAs[T any](s *Surface, capabilityID, instanceID string) T {
	s.tb.Helper()
	out := s.Observe(capabilityID, instanceID)
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		s.tb.Fatalf("Observe(%s): output %s does not decode into %T: %v", describe(capabilityID, instanceID), out, v, err)
	}
	return v
}

// Ref is what an agent keeps from discovery to call a capability later:
// the registration id that lists it and the surface version it saw.
type Ref struct {
	RegistrationID string
	SurfaceVersion string
}

// CaptureRef returns the Ref of capabilityID (on instanceID, if not "")
// in the consumer's current snapshot, to send later with
// InvokeOptions.RegistrationID and SurfaceVersion, as a stale agent would.
// It fails the test unless exactly one live listing matches.
func (s *Surface) CaptureRef(capabilityID, instanceID string) Ref {
	s.tb.Helper()
	snap := s.reg.Snapshot(surface.SnapshotOptions{Consumer: s.consumer})
	found := listings(snap, capabilityID, instanceID)
	if len(found) != 1 {
		s.tb.Fatalf("CaptureRef(%s): %d live listings, want exactly one", describe(capabilityID, instanceID), len(found))
	}
	return Ref{RegistrationID: found[0].registrationID, SurfaceVersion: snap.SurfaceVersion}
}

// As replaces the host context of the harness-created registry with a
// copy of host, as when the signed-in user changes, and returns s, so
// that a call reads s.As(admin).Invoke(…). The host context belongs to
// the registry, not to one call: every later snapshot and invocation sees
// the new host until the next As. As fails the test on a wrapped
// registry, whose host context is its own Options.Context.
func (s *Surface) As(host map[string]any) *Surface {
	s.tb.Helper()
	if !s.owned {
		s.tb.Fatalf("As: the registry was given in Options.Registry; its host context is its own Options.Context")
	}
	host = maps.Clone(host)
	s.hostMu.Lock()
	s.host = host
	s.hostMu.Unlock()
	return s
}

// Pending returns the pending confirmation requests, oldest first.
func (s *Surface) Pending() []surface.PendingConfirmation {
	return s.reg.Confirmations().Pending()
}

// Approve approves the pending confirmation request confirmationID or,
// for "", the only pending one, and returns it. It fails the test if that
// request is not pending or, for "", unless exactly one is.
func (s *Surface) Approve(confirmationID string) surface.PendingConfirmation {
	s.tb.Helper()
	p := s.pending("Approve", confirmationID)
	if !s.reg.Confirmations().Resolve(p.ConfirmationID, surface.Resolution{Approved: true}) {
		s.tb.Fatalf("Approve(%s): no longer pending", p.ConfirmationID)
	}
	return p
}

// Deny denies the pending confirmation request confirmationID or, for "",
// the only pending one, with the user's reason (kept for the audit trail,
// never shown to the agent), and returns it. It fails the test as Approve
// does.
func (s *Surface) Deny(confirmationID, reason string) surface.PendingConfirmation {
	s.tb.Helper()
	p := s.pending("Deny", confirmationID)
	if !s.reg.Confirmations().Resolve(p.ConfirmationID, surface.Resolution{Reason: reason}) {
		s.tb.Fatalf("Deny(%s): no longer pending", p.ConfirmationID)
	}
	return p
}

// Expire expires the pending confirmation request confirmationID or, for
// "", the only pending one, now, as its timer would, and returns it. It
// fails the test as Approve does.
func (s *Surface) Expire(confirmationID string) surface.PendingConfirmation {
	s.tb.Helper()
	p := s.pending("Expire", confirmationID)
	if !s.reg.Confirmations().Expire(p.ConfirmationID) {
		s.tb.Fatalf("Expire(%s): no longer pending", p.ConfirmationID)
	}
	return p
}

// pending returns the pending request id, or the only one for "".
func (s *Surface) pending(verb, id string) surface.PendingConfirmation {
	s.tb.Helper()
	pending := s.reg.Confirmations().Pending()
	if id == "" {
		switch len(pending) {
		case 0:
			s.tb.Fatalf("%s: no pending confirmation", verb)
		case 1:
			return pending[0]
		}
		ids := make([]string, len(pending))
		for i, p := range pending {
			ids[i] = p.ConfirmationID
		}
		s.tb.Fatalf("%s: %d pending confirmations (%s); name one", verb, len(pending), strings.Join(ids, ", "))
	}
	for _, p := range pending {
		if p.ConfirmationID == id {
			return p
		}
	}
	s.tb.Fatalf("%s(%s): not a pending confirmation", verb, id)
	return surface.PendingConfirmation{}
}

// Events returns a copy of every event the registry emitted since New, in
// order.
func (s *Surface) Events() []surface.Event { return s.events.Events() }

// AuditLog returns the audit records kept by Options.Audit (for a
// harness-created registry, its own sink of AuditCapacity records), oldest
// first. It fails the test for a wrapped registry without Options.Audit.
func (s *Surface) AuditLog() []surface.AuditEvent {
	s.tb.Helper()
	if s.audit == nil {
		s.tb.Fatalf("AuditLog: the registry was given in Options.Registry without Options.Audit, the sink it records into")
	}
	return s.audit.Events()
}

// Close stops recording events and closes the registry if the harness
// created it; a wrapped registry stays open. New registers Close as a
// cleanup of the test; calling it earlier is allowed, and calling it again
// does nothing. A failure to close fails the test.
func (s *Surface) Close() {
	s.closeOnce.Do(func() {
		if s.owned {
			if err := s.reg.Close(); err != nil {
				s.tb.Errorf("surfacetest: closing the registry: %v", err)
			}
		}
		s.unsubscribe()
	})
}

// teeSink records into the harness's memory sink and the caller's sink.
type teeSink struct {
	mem  *surface.MemorySink
	next surface.AuditSink
}

func (t teeSink) Record(ctx context.Context, e surface.AuditEvent) error {
	return errors.Join(t.mem.Record(ctx, e), t.next.Record(ctx, e))
}
