package surface

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// DuplicatePolicy decides what happens when a component registers with the
// type and instance id of a live one.
type DuplicatePolicy int

const (
	// DuplicateReject (the default) keeps the live registration: the newcomer gets
	// a dead handle and a component-rejected event. First wins, so
	// overlapping route transitions stay deterministic.
	DuplicateReject DuplicatePolicy = iota
	// DuplicateReplace unregisters the live registration, then registers the
	// newcomer.
	DuplicateReplace
)

// Candidate is what [Options.OnRegister] sees of a registration attempt.
type Candidate struct {
	// Component is the definition being registered.
	Component Component
	// Origin is the registrant's trust label, "first-party" by default.
	// It is a claim by the calling code, useful to segment honest
	// registrants (plugin SDKs tagging themselves), not a proof.
	Origin string
}

// Verdict is the registration guard's answer: accept, accept with extra
// policies, or reject.
type Verdict struct {
	// Reject turns the registration into a dead handle. The zero Verdict
	// accepts as is.
	Reject bool
	// Policies are added to every capability of an accepted component,
	// after the component's own: the guard accepts with restrictions (for
	// example RequireConfirmation for a third-party widget).
	Policies []Policy
}

// Options configure a [Registry]. The zero value of every field means its
// documented default; New accepts a nil *Options for all defaults.
type Options struct {
	// Environment selects development diagnostics. Default Production.
	Environment Environment
	// Context returns the host context (user, tenant, …) handed to
	// policies and handlers. It must be cheap and synchronous and must not
	// call back into the registry. Default: an empty context.
	Context func() map[string]any
	// Policies govern every capability, outermost in every chain.
	Policies []Policy
	// SuffixCollisions decides what happens when a view capability
	// "view:T.n" is registered while the executor exposes the procedure
	// path "T.n" (a confusable pair). Default SuffixWarn.
	SuffixCollisions SuffixPolicy
	// OnRegister, if set, is the registration guard: it may reject a
	// candidate (a dead handle and a component-rejected event) or accept
	// it with restrictions. A panicking guard rejects.
	OnRegister func(Candidate) Verdict
	// OnDuplicate decides what a duplicate live instance does. Default Reject.
	OnDuplicate DuplicatePolicy
	// Route, if set, describes the host's current route for snapshots.
	Route func() *Route
	// Limits bounds what the registry accepts; zero fields take defaults.
	Limits Limits
	// Audit receives audit records. Default: a MemorySink of 1000 records.
	// In EnvDevelopment every record is also printed on stderr, one line
	// each, starting "[agent-surface audit]" and followed by the record's
	// fields as key=value in a fixed order (see SlogSink).
	Audit AuditSink
	// AuditObservationRefusals audits, at metadata level, the observation
	// calls refused before their handler ran (unavailable,
	// unauthenticated, unauthorized, rate limited), so that an operator
	// sees an agent probing reads. Observations are otherwise never
	// audited (the spec's level none); their successful reads stay
	// unaudited either way. A call that resolves nothing (an unknown id,
	// or a capability hidden from its consumer, which for that consumer
	// does not exist) is audited with or without the option, as every
	// resolution failure is.
	AuditObservationRefusals bool
	// Redact, if set, rewrites the input and output payloads of
	// capabilities audited at level full before they are recorded. It
	// applies to audit payloads only: the diagnostics written to Logger
	// may carry the text of errors that handlers, executors and hooks
	// return (never shown to agents), under the attribute "error" next to
	// the capability's id. Keep secrets out of logs in the Logger's
	// handler, for instance with slog.HandlerOptions.ReplaceAttr.
	Redact func(capabilityID string, p AuditPayload) AuditPayload
	// Logger receives diagnostics. Default: in EnvDevelopment and EnvTest,
	// a text handler on stderr; in production, nothing (discard).
	Logger *slog.Logger
	// Telemetry, if set, receives the registry's telemetry (invocation
	// phases and settlements, confirmations, registrations) for tracing
	// and metrics; see package otelsurface. New copies it.
	Telemetry *Telemetry
	// IsolateHandlers runs every handler (and procedure call) on a
	// goroutine of its own, so that Invoke settles at the deadline, on
	// unmount or on cancellation even when the handler ignores its
	// context: the handler keeps running and its late return is only
	// audited. It costs a goroutine handoff and a timer per call (about
	// 2 µs), and the action queue admits the next call while the
	// abandoned handler may still run.
	//
	// By default handlers run on the invoking goroutine with a context
	// that ends at the deadline, on unmount, Close or the caller's
	// cancellation. The outcome is the same (the first settlement in time
	// wins: a handler returning after its deadline settles TIMEOUT), but a
	// handler that ignores its context delays Invoke until it returns, and
	// an action holds its queue slot until then.
	IsolateHandlers bool
	// Now is the registry's clock, used for every timestamp, TTL check and
	// duration, and by policies (PolicyContext.Now). Default time.Now.
	// Timers (invocation timeouts, confirmation expiry) run on the runtime
	// clock; run tests of them under testing/synctest, which virtualizes
	// both.
	Now func() time.Time
}

// SuffixPolicy is the response to a view capability whose id suffix equals
// a domain procedure path: a lint for confusable tools, not a security
// control.
type SuffixPolicy int

const (
	// SuffixWarn (the default) logs, emits collision-suspected and audits.
	SuffixWarn SuffixPolicy = iota
	// SuffixOff does nothing.
	SuffixOff
	// SuffixError rejects the definition with PLANE_VIOLATION.
	SuffixError
)

// HandleStatus is the state of a registration handle.
type HandleStatus uint8

const (
	// HandleActive: the registration is live.
	HandleActive HandleStatus = iota + 1
	// HandleRejected: the registration never went live (duplicate or guard).
	HandleRejected
	// HandleUnregistered: the registration was live and has been removed.
	HandleUnregistered
)

// String returns "active", "rejected" or "unregistered".
func (s HandleStatus) String() string {
	switch s {
	case HandleActive:
		return "active"
	case HandleRejected:
		return "rejected"
	case HandleUnregistered:
		return "unregistered"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Registry holds the live surface of one user session or page: the
// registered components, their capabilities, the surface version, and the
// event stream. It is safe for concurrent use by many goroutines. The
// registry never calls user code (handlers, When, guards, listeners, the
// host context or route providers) while holding its lock.
type Registry struct {
	// opts are the options New was given, normalized: Environment,
	// Limits, Logger and Audit have their defaults, Policies and Telemetry
	// are the registry's own copies (Telemetry nil when it sets no hook).
	// Now stays nil for time.Now (see now). Never changed after New.
	opts Options

	surfaceID string
	console   AuditSink     // development only: audit on stderr
	fpSeed    maphash.Seed  // request fingerprints
	idKey     uint64        // mixes the random part of registration ids
	closingCh chan struct{} // closed by Close: queued invocations give up

	// executor performs procedure calls; replaced, never mutated.
	executor atomic.Pointer[executorBox]

	counter atomic.Uint64 // registration ids; rejected handles take one too
	version atomic.Uint64 // written under mu, read anywhere

	// The lock order. A goroutine holding one of these locks takes only
	// locks to its right:
	//
	//	Confirmations.mu → Grants.mu → Registry.mu → registration.xmu → execution.mu
	//	                                            → Registry.evMu
	//
	// Confirmations.request and Grants.insertLocked take Registry.mu while
	// holding their own lock (to refuse after Close and count the expiry
	// timer in ctxWG); ResolveGrant holds Confirmations.mu while it stores
	// the grant, so that the approval and the grant are one step; an
	// unregistration holds Registry.mu while it aborts the registration's
	// executions (xmu, then each execution's mu) and while it queues
	// events (evMu). Every other lock (the dedupe cache's, the
	// observation pool's, each queueGroup's and keyedGroups', the
	// toolset's, a rate limiter's, the audit sinks') is a leaf: it is
	// never held while another is taken. No lock is held while user code
	// runs.
	mu      sync.RWMutex             // guards the fields below; invocations read-lock it to resolve
	closed  bool                     // Close has begun
	ordered []*registration          // active registrations in snapshot order; nil when out of date
	byID    map[string]*registration // active registrations by registration id
	byType  map[string]*typeIndex    // active registrations by type: by instance id, and the candidates of each view capability
	// spareType is the emptied index of the last type whose instances all
	// went, reused by the next new type: a page that unmounts its rows
	// and mounts others does not grow its index again.
	spareType  *typeIndex
	byProc     map[string][]capRef // the candidates of each procedure path
	tombs      tombstones
	unmounting []chan struct{} // registrations gone with inline handlers still running
	pending    []Event         // events of the mutation in progress

	evMu      sync.Mutex  // guards the fields below
	listeners []*listener // replaced, never changed: a delivery ranges over the one it read
	queue     []Event     // undelivered events, in emission order
	draining  bool        // some goroutine is delivering the queue
	batches   int         // open Batch calls: delivery waits
	// queuedVersion is the version after the last mutation whose events
	// were queued: what a surface-changed delivered now carries.
	queuedVersion uint64

	obs     obsPool        // observation admission (own lock)
	dedupe  *dedupeCache   // idempotency keys (own lock)
	confirm Confirmations  // confirmation store (own lock)
	grants  Grants         // standing grants (own lock)
	execWG  sync.WaitGroup // isolated handlers: goroutines of our own
	ctxWG   sync.WaitGroup // RegisterContext unregistrations and confirmation expiries in progress
}

// discardLogger is the logger of registries given none. It is never
// written: a *slog.Logger is safe to share.
var discardLogger = slog.New(slog.DiscardHandler)

// registration is one live (or dead) component registration. Its
// structural fields are frozen at Register.
type registration struct {
	id          string
	typ         string
	instance    string
	description string
	parent      Parent         // zero when none
	meta        JSONText       // agent-visible, frozen
	metaMap     map[string]any // meta decoded for policies; nil when none
	internal    map[string]any // for policies, never serialized
	priority    int
	caps        []regCap // observations, actions (each by name), then procedure references
	nObs        int      // observations
	nView       int      // observations and actions

	// The lengths of the component and guard layers of each chain
	// (registry, component, guard, capability), for Explain.
	nComponentPolicies, nGuardPolicies int

	h Handle // the one handle of this registration

	slot uint32 // in its type's index (typeIndex.regs); guarded by Registry.mu

	// Guarded by xmu.
	xmu      sync.Mutex
	gone     bool          // unregistered or closed: no handler may start
	inflight []*execution  // running handlers
	drained  chan struct{} // made once gone with handlers running; closed when the last returns

	// Guarded by Registry.mu.
	status  HandleStatus
	st      *regState   // current state; replaced, never mutated
	actions queueGroup  // the instance's queue: concurrency mode instance (own lock)
	keyed   keyedGroups // concurrency mode key: the queues by key (own lock)
	stopCtx func() bool
	ctxDone <-chan struct{} // RegisterContext's context's: once closed, the registration is on its way out
}

type regCap struct {
	id         string
	name       string
	def        *capDef
	chain      []Policy       // registry ++ component ++ guard ++ capability
	meta       JSONText       // agent-visible, frozen
	metaMap    map[string]any // meta decoded for policies; nil when none
	bound      *binding       // procedure references only
	group      *queueGroup    // actions and procedures: the admission group, nil in key mode
	discovers  bool           // some policy in chain has a Discover hook
	authorizes bool           // … an Authorize hook
	invokes    bool           // … an Invoke hook or a confirmation escalation
	whenOff    bool           // Refresh last announced When false; guarded by Registry.mu
}

// New returns a registry. A nil opts means all defaults.
func New(opts *Options) *Registry {
	r := &Registry{
		surfaceID: newSurfaceID(),
		fpSeed:    maphash.MakeSeed(),
		idKey:     rand.Uint64(),
		closingCh: make(chan struct{}),
	}
	if opts != nil {
		r.opts = *opts
	}
	o := &r.opts
	o.Environment = cmp.Or(o.Environment, EnvProduction)
	o.Policies = slices.Clone(o.Policies)
	o.Limits = o.Limits.withDefaults()
	o.Telemetry = telemetryOf(o.Telemetry)
	switch {
	case o.Logger != nil:
	case o.Environment.isDev():
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)) // diagnostics a developer cannot miss
	default:
		o.Logger = discardLogger
	}
	if o.Audit == nil {
		o.Audit = NewMemorySink(defaultMemoryCapacity)
	}
	if o.Environment == EnvDevelopment {
		r.console = &consoleSink{w: os.Stderr}
	}
	r.confirm.r = r
	r.grants.r = r
	r.dedupe = newDedupeCache(o.Limits.DedupeCacheSize)
	return r
}

// now reads the registry's clock.
func (r *Registry) now() time.Time {
	if r.opts.Now == nil {
		return time.Now()
	}
	return r.opts.Now()
}

// SurfaceID identifies this registry ("srf_" + 22 base62 characters); a
// new registry (a page reload) has a new one.
func (r *Registry) SurfaceID() string { return r.surfaceID }

// Version is the current surface version, a decimal string starting at
// "0". Compare versions for equality only.
func (r *Registry) Version() string { return strconv.FormatUint(r.version.Load(), 10) }

// Environment returns the registry's environment.
func (r *Registry) Environment() Environment { return r.opts.Environment }

// Limits returns the registry's limits with defaults filled in.
func (r *Registry) Limits() Limits { return r.opts.Limits }

// Register validates c and makes its capabilities live at once.
//
// It returns a *DefinitionError, in every environment, for a structural
// defect (bad ids, missing descriptions or handlers, schemas outside the
// supported subset, plane violations, limits). A runtime rejection — a live
// duplicate under [DuplicateReject], or the [Options.OnRegister] guard saying no —
// is not an error: the handle is dead (Status() == Rejected) and a
// component-rejected event is emitted. After Close, Register returns
// ErrClosed.
func (r *Registry) Register(c Component) (*Handle, error) {
	reg, derr := r.buildRegistration(&c)
	if derr != nil {
		return nil, derr
	}
	var verdict Verdict
	if r.opts.OnRegister != nil {
		origin := cmp.Or(c.Origin, "first-party")
		if verdict = r.guard(c, origin); verdict.Reject {
			r.opts.Logger.Warn("surface: registration rejected by the guard", "type", reg.typ, "instanceId", reg.instance, "origin", origin)
			r.mu.Lock()
			return r.rejectLocked(reg, RejectReasonGuard)
		}
	}
	reg.bindPolicies(r.opts.Policies, c.Policies, verdict.Policies)

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	old := r.instanceLocked(reg.typ, reg.instance)
	if old != nil {
		// A registration whose RegisterContext context has ended is being
		// unregistered (on another goroutine, ctx's AfterFunc): it is
		// replaced, never a duplicate, so that a component unmounted by
		// its context can mount again at once.
		leaving := closedChan(old.ctxDone)
		if r.opts.OnDuplicate == DuplicateReject && !leaving {
			r.opts.Logger.Warn("surface: duplicate instance rejected", "type", reg.typ, "instanceId", reg.instance, "live", old.id)
			return r.rejectLocked(reg, RejectReasonDuplicate)
		}
		r.unregisterLocked(old, r.now())
	}
	reg.status = HandleActive
	reg.st = enabledState
	if c.Disabled {
		reg.st = disabledState
	}
	r.insertLocked(reg)
	emitLocked(r, ComponentRegistered{RegistrationID: reg.id, ComponentType: reg.typ, InstanceID: reg.instance})
	r.bumpLocked()
	r.unlockAndDrain()
	r.observeRegistered(reg, old) // observe: reg is live, old (if any) replaced
	if old != nil {
		r.audit(AuditEvent{Type: AuditUnregistration, RegistrationID: old.id})
	}
	r.audit(AuditEvent{Type: AuditRegistration, RegistrationID: reg.id})
	return reg.handle(r), nil
}

// closedChan reports whether ch is closed; a nil ch never is.
func closedChan(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// RegisterContext is Register, and unregisters the component when ctx
// ends. The unregistration runs on a goroutine of its own; meanwhile the
// component is already on its way out: registering the same type and
// instance again replaces it, whatever [Options.OnDuplicate] says.
func (r *Registry) RegisterContext(ctx context.Context, c Component) (*Handle, error) {
	h, err := r.Register(c)
	if err != nil {
		return h, err
	}
	if !h.lockActive("") {
		return h, nil
	}
	defer r.mu.Unlock()
	// ctxWG lets Close wait for an unregistration already triggered by ctx.
	r.ctxWG.Add(1)
	h.reg.ctxDone = ctx.Done()
	h.reg.stopCtx = context.AfterFunc(ctx, func() {
		defer r.ctxWG.Done()
		h.Unregister()
	})
	return h, nil
}

// guard runs the registration guard; a panic rejects.
func (r *Registry) guard(c Component, origin string) Verdict {
	return guarded(r, "the registration guard", "", Verdict{Reject: true}, func() Verdict { return r.opts.OnRegister(Candidate{Component: c, Origin: origin}) })
}

// bindPolicies builds each capability's chain: registry, component, guard
// restrictions, capability. Without component, guard or capability
// policies the registry's slice is shared.
func (reg *registration) bindPolicies(registry, component, restrictions []Policy) {
	reg.nComponentPolicies, reg.nGuardPolicies = len(component), len(restrictions)
	for i := range reg.caps {
		rc := &reg.caps[i]
		if len(component) == 0 && len(restrictions) == 0 && len(rc.def.policies) == 0 {
			rc.chain = registry
		} else {
			rc.chain = slices.Concat(registry, component, restrictions, rc.def.policies)
		}
		for k := range rc.chain {
			pol := &rc.chain[k]
			rc.discovers = rc.discovers || pol.Discover != nil
			rc.authorizes = rc.authorizes || pol.Authorize != nil
			rc.invokes = rc.invokes || pol.Invoke != nil || pol.escalate != nil
		}
	}
}

// rejectLocked returns a dead handle and emits component-rejected. It
// releases r.mu.
func (r *Registry) rejectLocked(reg *registration, reason RejectReason) (*Handle, error) {
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	reg.status = HandleRejected
	emitLocked(r, ComponentRejected{ComponentType: reg.typ, InstanceID: reg.instance, Reason: reason})
	r.unlockAndDrain()
	r.audit(AuditEvent{Type: AuditRegistrationRejected})
	return reg.handle(r), nil
}

func (r *Registry) unregisterLocked(reg *registration, now time.Time) {
	reg.status = HandleUnregistered
	r.stopCtxLocked(reg)
	if ch := r.abortInflightLocked(reg, false); ch != nil {
		// Close will wait for these handlers too. Drop the drained first.
		r.unmounting = slices.DeleteFunc(r.unmounting, isClosed)
		r.unmounting = append(r.unmounting, ch)
	}
	r.removeLocked(reg)
	r.tombs.add(tombstoneOf(reg), now, r.opts.Limits.TombstoneSize, r.opts.Limits.TombstoneTTL)
	emitLocked(r, ComponentUnregistered{RegistrationID: reg.id, ComponentType: reg.typ, InstanceID: reg.instance})
	r.bumpLocked()
}

func (r *Registry) stopCtxLocked(reg *registration) {
	if reg.stopCtx != nil {
		if reg.stopCtx() {
			r.ctxWG.Done() // the AfterFunc will never run
		}
		reg.stopCtx = nil
	}
}

// bumpLocked increments the version and queues a surface-changed event.
func (r *Registry) bumpLocked() {
	r.version.Add(1)
	emitLocked(r, SurfaceChanged{})
}

// Close tears the registry down: in-flight and queued invocations settle
// CANCELLED (retry no) and their handler contexts are cancelled; every
// registration is dropped (no tombstones, no unregister events, no version
// bumps); listeners are dropped after pending events are delivered; later
// Register calls fail with ErrClosed and Invoke calls with CANCELLED.
//
// Close is idempotent. It waits for running handlers to return, so
// handlers must honour their context; it also waits for the
// unregistrations that RegisterContext contexts already triggered.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.closingCh)
	gone := r.liveByType(r.orderedLocked()) // observe: what Close removes, reported below
	for _, reg := range r.orderedLocked() {
		reg.status = HandleUnregistered
		r.stopCtxLocked(reg)
		if ch := r.abortInflightLocked(reg, true); ch != nil {
			r.unmounting = append(r.unmounting, ch)
		}
	}
	unmounting := r.unmounting
	r.unmounting = nil
	r.ordered, r.byID, r.byType, r.spareType, r.byProc, r.tombs = nil, nil, nil, nil, nil, tombstones{}
	r.evMu.Lock()
	r.queue = slices.DeleteFunc(r.queue, isSurfaceChanged) // no surface-changed after Close
	r.evMu.Unlock()
	r.unlockAndDrain()
	r.observeClosed(gone) // observe: the registrations removed
	r.confirm.closeAll()  // pending confirmations expire; their events still go out
	r.grants.closeAll()   // standing grants end with the session
	r.evMu.Lock()
	r.listeners = nil
	r.evMu.Unlock()
	r.ctxWG.Wait()
	for _, ch := range unmounting { // inline handlers, on their callers' goroutines
		<-ch
	}
	r.execWG.Wait() // isolated handlers, on goroutines of their own
	return nil
}

// Done returns a channel that is closed when Close begins, for adapters
// that hold per-registry resources.
func (r *Registry) Done() <-chan struct{} { return r.closingCh }

// closing reports whether Close has begun, without the lock.
func (r *Registry) closing() bool { return isClosed(r.closingCh) }

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch chan struct{}) bool { return closedChan(ch) }

// freezeMeta encodes a meta record as canonical JSON within the byte limit.
func freezeMeta(m map[string]any, field string, max int) (JSONText, *DefinitionError) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return "", &DefinitionError{Code: DefinitionInvalid, Field: field, Message: "meta must be a JSON record", Err: err}
	}
	if len(b) > max {
		return "", defErr(DefinitionLimitExceeded, field, fmt.Sprintf("meta is %d bytes, more than the limit of %d", len(b), max))
	}
	return JSONText(b), nil
}
