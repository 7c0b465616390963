package surface

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// DuplicatePolicy decides what happens when a component registers with the
// type and instance id of a live one.
type DuplicatePolicy int

const (
	// Reject (the default) keeps the live registration: the newcomer gets
	// a dead handle and a component-rejected event. First wins, so
	// overlapping route transitions stay deterministic.
	Reject DuplicatePolicy = iota
	// Replace unregisters the live registration, then registers the
	// newcomer.
	Replace
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
	// Reject turns the registration into a dead handle.
	Reject bool
	// Policies are added to every capability of an accepted component,
	// after the component's own: the guard accepts with restrictions (for
	// example RequireConfirmation for a third-party widget).
	Policies []Policy
}

// Accept, Refuse and Restrict build guard verdicts.
var (
	Accept = Verdict{}
	Refuse = Verdict{Reject: true}
)

// Restrict accepts with the given policies added.
func Restrict(policies ...Policy) Verdict { return Verdict{Policies: policies} }

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
	// In Development, records also go to a text log on stderr.
	Audit AuditSink
	// Redact, if set, rewrites the input and output payloads of
	// capabilities audited at level full before they are recorded.
	Redact func(capabilityID string, p AuditPayload) AuditPayload
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
	// Observer, if set, receives the registry's telemetry (invocation
	// phases and settlements, confirmations, registrations) for tracing
	// and metrics; see package otelsurface. New copies it.
	Observer *Observer
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
	// duration, and by policies (PolicyContext.Now). Default: the system
	// clock, read as time.Now reads it but with one clock read instead of
	// two (the wall reading is an anchor at most 100 ms old plus the
	// monotonic time since, so a step of the wall clock shows in
	// timestamps within 100 ms; durations are exact).
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

// Status is the state of a registration handle.
type Status uint8

const (
	// Active: the registration is live.
	Active Status = iota + 1
	// Rejected: the registration never went live (duplicate or guard).
	Rejected
	// Unregistered: the registration was live and has been removed.
	Unregistered
)

// String returns "active", "rejected" or "unregistered".
func (s Status) String() string {
	switch s {
	case Active:
		return "active"
	case Rejected:
		return "rejected"
	case Unregistered:
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
	env        Environment
	hostCtx    func() map[string]any
	onRegister func(Candidate) Verdict
	policies   []Policy
	onDup      DuplicatePolicy
	route      func() *Route
	limits     Limits
	log        *slog.Logger
	userNow    func() time.Time // Options.Now; nil for the real clock
	realClock  bool             // userNow is nil: now reads clock
	isolate    bool             // Options.IsolateHandlers
	sinksCopy  bool             // sink and console keep no pointer of a record
	clock      wallClock
	surfaceID  string
	sink       AuditSink
	console    AuditSink // development only: audit on stderr
	redact     func(string, AuditPayload) AuditPayload
	observer   *Observer // Options.Observer; nil when it sets no hook

	// executor performs procedure calls; replaced, never mutated.
	executor atomic.Pointer[executorBox]
	suffix   SuffixPolicy

	// listeners is replaced, never mutated (copy on write).
	listeners atomic.Pointer[[]*listener]

	mu  readLock   // invocations only read-lock it, to resolve
	mem MemorySink // the default sink
	obs obsPool    // observation admission

	closed      bool
	scPending   bool          // queue holds a SurfaceChanged placeholder
	draining    bool          // some goroutine is delivering the queue
	version     atomic.Uint64 // written under mu, read anywhere
	verText     atomic.Pointer[versionText]
	fpSeed      maphash.Seed               // request fingerprints
	pipes       sync.Pool                  // *pipeline, reused when nothing can reach them
	outBufs     sync.Pool                  // *[]byte buffers for encoding outputs
	counter     atomic.Uint64              // registration ids; rejected handles take one too
	lanes       atomic.Uint32              // pipelines made: each takes the next audit lane
	idKey       uint64                     // mixes the random part of registration ids
	entries     entryOrder                 // active registrations in snapshot order
	byType      map[string]*typeGroup      // active registrations per type; some groups may be empty
	emptyGroups int                        // groups in byType without registrations
	lastGroup   *typeGroup                 // the group groupLocked found last (registrations often come in runs of one type), or nil
	byProc      map[string][]*registration // active registrations per procedure path
	tombs       tombstones
	closingCh   chan struct{}   // closed by Close: queued invocations give up; made on first use
	closedFlag  atomic.Bool     // Close has begun (a lock-free check)
	execWG      sync.WaitGroup  // isolated handlers and deadline watches: goroutines of our own
	unmounting  []chan struct{} // registrations gone with inline handlers still running
	dedupe      dedupeCache     // idempotency keys (own lock)
	confirm     Confirmations   // confirmation store (own lock)
	queue       []Event         // undelivered events, in mutation order
	ctxWG       sync.WaitGroup  // RegisterContext unregistrations and confirmation expiries in progress
}

// discardLogger is the logger of registries given none. It is never
// written: a *slog.Logger is safe to share.
var discardLogger = slog.New(slog.DiscardHandler)

// regState is the mutable part of a registration. It is immutable once
// stored: a change stores a new one, so snapshots may keep the old one.
type regState struct {
	disabled  bool
	overrides map[string]Availability
}

// Shared states of registrations without overrides.
var (
	enabledState  = &regState{}
	disabledState = &regState{disabled: true}
)

// Availability is a pushed availability override for one capability.
type Availability struct {
	// Available false makes the capability unavailable; true stops an
	// earlier override from blocking.
	Available bool
	// Reason is shown to the agent when unavailable. Default "unavailable".
	Reason string
}

// registration is one live (or dead) component registration. Its
// structural fields are frozen at Register.
type registration struct {
	id          string // a prefix of ids
	ids         string // the registration id, then the view capability ids
	typ         string
	instance    string
	description string
	ext         *regExtras // never nil; &noExtras when nothing is set
	priority    int
	caps        []regCap // observations, actions (each by name), then procedure references
	nObs        int32
	nView       int32     // observations and actions
	capsBuf     [2]regCap // backing of caps for small components

	h Handle // the one handle of this registration

	// Guarded by xmu, taken after Registry.mu when both are held (with
	// gone, below).
	xmu      sync.Mutex
	inflight []*execution  // running handlers
	drained  chan struct{} // made once gone with handlers running; closed when the last returns

	// Guarded by Registry.mu (with typeIdx and status, below).
	st      *regState  // current state; replaced, never mutated
	actions queueGroup // the instance's action slot and queue
	group   *typeGroup // its type's group while active
	stopCtx func() bool

	// Small fields last, in one word: a registration fits a smaller
	// allocation size class.
	typeIdx int32  // position in group.regs; Registry.mu
	status  Status // Registry.mu
	gone    bool   // unregistered or closed: no handler may start; xmu
}

// regExtras holds the parts of a registration that components seldom
// set, allocated only when one is.
type regExtras struct {
	parent   Parent
	meta     JSONText
	metaMap  map[string]any // decoded meta for policies; nil when none
	internal map[string]any
}

// noExtras is the shared extras of registrations that set none; never
// written.
var noExtras regExtras

type regCap struct {
	id         string
	name       string
	def        *capDef
	chain      []Policy   // registry ++ component ++ guard ++ capability
	x          *capExtras // never nil; &noCapExtras when there is neither meta nor a binding
	discovers  bool       // some policy in chain has a Discover hook
	authorizes bool       // … an Authorize hook
	invokes    bool       // … an Invoke hook or a confirmation escalation
	whenOff    bool       // Refresh last announced When false; guarded by Registry.mu
}

// capExtras holds the parts of a capability that are seldom set.
type capExtras struct {
	meta    JSONText
	metaMap map[string]any // decoded meta for policies; nil when none
	bound   *binding       // procedure references only
}

// noCapExtras is the shared extras of capabilities without meta or a
// binding; never written.
var noCapExtras capExtras

// New returns a registry. A nil opts means all defaults.
func New(opts *Options) *Registry {
	var o Options
	if opts != nil {
		o = *opts
	}
	r := &Registry{
		env:        o.Environment,
		hostCtx:    o.Context,
		onRegister: o.OnRegister,
		policies:   slices.Clone(o.Policies),
		suffix:     o.SuffixCollisions,
		redact:     o.Redact,
		onDup:      o.OnDuplicate,
		route:      o.Route,
		limits:     o.Limits.withDefaults(),
		log:        o.Logger,
		userNow:    o.Now,
		isolate:    o.IsolateHandlers,
		surfaceID:  newSurfaceID(),
		fpSeed:     maphash.MakeSeed(),
		idKey:      rand.Uint64(),
		sink:       o.Audit,
		observer:   observerOf(o.Observer),
	}
	if r.sink == nil {
		r.mem.capacity = defaultMemoryCapacity
		r.sink = &r.mem
	}
	r.confirm.r = r
	r.dedupe.init(r.limits.DedupeCacheSize)
	r.outBufs.New = func() any { b := make([]byte, 0, 512); return &b }
	r.pipes.New = func() any { return new(pipeline) }
	if r.env == Development {
		r.console = NewSlogSink(o.Logger) // the diagnostic stream: the logger, else stderr
	}
	switch r.sink.(type) {
	case *MemorySink, *SlogSink: // they copy a record's values before Record returns
		r.sinksCopy = true
	}
	if r.env == "" {
		r.env = Production
	}
	if r.log == nil {
		r.log = discardLogger
	}
	r.realClock = r.userNow == nil
	return r
}

// now reads the registry's clock.
func (r *Registry) now() time.Time {
	if r.realClock {
		return r.clock.now()
	}
	return r.userNow()
}

// SurfaceID identifies this registry ("srf_" + 22 base62 characters); a
// new registry (a page reload) has a new one.
func (r *Registry) SurfaceID() string { return r.surfaceID }

// Version is the current surface version, a decimal string starting at
// "0". Compare versions for equality only.
func (r *Registry) Version() string { return r.versionString(r.version.Load()) }

// versionText is a surface version and its decimal form.
type versionText struct {
	v uint64
	s string
}

// versionString formats v, reusing the last formatting: every result
// carries the version, which changes far less often than calls settle.
func (r *Registry) versionString(v uint64) string {
	if t := r.verText.Load(); t != nil && t.v == v {
		return t.s
	}
	t := &versionText{v: v, s: strconv.FormatUint(v, 10)}
	r.verText.Store(t)
	return t.s
}

// Environment returns the registry's environment.
func (r *Registry) Environment() Environment { return r.env }

// Limits returns the registry's limits with defaults filled in.
func (r *Registry) Limits() Limits { return r.limits }

// Handle controls one registration. Its methods are safe for concurrent
// use; after the registration is gone they do nothing.
type Handle struct {
	r   *Registry
	reg *registration
}

func (reg *registration) handle(r *Registry) *Handle {
	reg.h = Handle{r: r, reg: reg}
	return &reg.h
}

// ID returns the registration id ("reg_…"), also for rejected handles.
func (h *Handle) ID() string { return h.reg.id }

// Status reports whether the registration is live.
func (h *Handle) Status() Status {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.reg.status
}

// Register validates c and makes its capabilities live at once.
//
// It returns a *DefinitionError, in every environment, for a structural
// defect (bad ids, missing descriptions or handlers, schemas outside the
// supported subset, plane violations, limits). A runtime rejection — a live
// duplicate under [Reject], or the [Options.OnRegister] guard saying no —
// is not an error: the handle is dead (Status() == Rejected) and a
// component-rejected event is emitted. After Close, Register returns
// ErrClosed.
func (r *Registry) Register(c Component) (*Handle, error) {
	reg, derr := r.buildRegistration(&c)
	if derr != nil {
		return nil, derr
	}
	var verdict Verdict
	if r.onRegister != nil {
		origin := c.Origin
		if origin == "" {
			origin = "first-party"
		}
		if verdict = r.guard(c, origin); verdict.Reject {
			r.log.Warn("surface: registration rejected by the guard", "type", reg.typ, "instanceId", reg.instance, "origin", origin)
			r.mu.Lock()
			return r.rejectLocked(reg, RejectedByGuard)
		}
	}
	reg.bindPolicies(r.policies, c.Policies, verdict.Policies)

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	g := r.groupLocked(reg.typ)
	old, h := g.lookup(reg.instance)
	if old != nil {
		if r.onDup == Reject {
			r.log.Warn("surface: duplicate instance rejected", "type", reg.typ, "instanceId", reg.instance, "live", old.id)
			return r.rejectLocked(reg, RejectedDuplicate)
		}
		r.unregisterLocked(old, r.now())
	}
	reg.status = Active
	st := enabledState
	if c.Disabled {
		st = disabledState
	}
	reg.st = st
	r.insertLocked(reg, g, h)
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

// RegisterContext is Register, and unregisters the component when ctx ends.
func (r *Registry) RegisterContext(ctx context.Context, c Component) (*Handle, error) {
	h, err := r.Register(c)
	if err != nil {
		return h, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.reg.status != Active || r.closed {
		return h, nil
	}
	// ctxWG lets Close wait for an unregistration already triggered by ctx.
	r.ctxWG.Add(1)
	h.reg.stopCtx = context.AfterFunc(ctx, func() {
		defer r.ctxWG.Done()
		h.Unregister()
	})
	return h, nil
}

// guard runs the registration guard; a panic rejects.
func (r *Registry) guard(c Component, origin string) (v Verdict) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("surface: registration guard panicked", "panic", fmt.Sprint(p))
			v = Refuse
		}
	}()
	return r.onRegister(Candidate{Component: c, Origin: origin})
}

// bindPolicies builds each capability's chain: registry, component, guard
// restrictions, capability. Without component, guard or capability
// policies the registry's slice is shared.
func (reg *registration) bindPolicies(registry, component, restrictions []Policy) {
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
	reg.status = Rejected
	emitLocked(r, ComponentRejected{ComponentType: reg.typ, InstanceID: reg.instance, Reason: reason})
	r.unlockAndDrain()
	r.audit(AuditEvent{Type: AuditRegistrationRejected})
	return reg.handle(r), nil
}

// groupLocked returns the group of a component type, making it if need
// be. Emptied groups are kept for the type's next registration; making a
// group sweeps them once they outnumber the others (plus a margin), so
// they stay bounded.
func (r *Registry) groupLocked(typ string) *typeGroup {
	if g := r.lastGroup; g != nil && typ == g.typ { // usually the same bytes: a pointer compare
		return g
	}
	g := r.byType[typ]
	if g == nil {
		if r.byType == nil {
			r.byType = make(map[string]*typeGroup)
		}
		if r.emptyGroups > 64 && 2*r.emptyGroups > len(r.byType) {
			maps.DeleteFunc(r.byType, func(_ string, g *typeGroup) bool { return len(g.regs) == 0 })
			r.emptyGroups = 0
		}
		g = &typeGroup{typ: typ}
		r.byType[typ] = g
		r.emptyGroups++ // until insertLocked adds to it
	}
	r.lastGroup = g // stays in byType: only this function sweeps it, and Close clears it
	return g
}

// insertLocked adds reg to the indexes; g is its type's group and h what
// g.lookup returned for reg.instance.
func (r *Registry) insertLocked(reg *registration, g *typeGroup, h uint64) {
	r.entries.add(reg)
	if len(g.regs) == 0 {
		r.emptyGroups--
	}
	g.add(reg, h)
	reg.group = g
	for i := int(reg.nView); i < len(reg.caps); i++ {
		if r.byProc == nil {
			r.byProc = make(map[string][]*registration)
		}
		path := reg.caps[i].name
		r.byProc[path] = append(r.byProc[path], reg)
	}
}

func (r *Registry) unregisterLocked(reg *registration, now time.Time) {
	reg.status = Unregistered
	r.stopCtxLocked(reg)
	if ch := r.abortInflightLocked(reg, false); ch != nil {
		// Close will wait for these handlers too. Drop the drained first.
		r.unmounting = slices.DeleteFunc(r.unmounting, func(ch chan struct{}) bool {
			select {
			case <-ch:
				return true
			default:
				return false
			}
		})
		r.unmounting = append(r.unmounting, ch)
	}
	r.entries.remove()
	for i := int(reg.nView); i < len(reg.caps); i++ {
		path := reg.caps[i].name
		refs := slices.DeleteFunc(slices.Clone(r.byProc[path]), func(x *registration) bool { return x == reg })
		if len(refs) == 0 {
			delete(r.byProc, path)
		} else {
			r.byProc[path] = refs
		}
	}
	g := reg.group
	reg.group = nil
	if g.remove(reg); len(g.regs) == 0 {
		r.emptyGroups++
	}
	// Ids only: nothing executable outlives the registration.
	ts := tombstone{regID: reg.id, typ: reg.typ, instance: reg.instance, ids: reg.ids}
	if len(reg.caps) > int(reg.nView) {
		ts.procIDs = make([]string, 0, len(reg.caps)-int(reg.nView))
		for _, rc := range reg.caps[reg.nView:] {
			ts.procIDs = append(ts.procIDs, rc.id)
		}
	}
	r.tombs.add(ts, now, &r.limits)
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

// Unregister removes the registration: its capabilities disappear from
// later snapshots and a tombstone remembers its id for a while, so late
// calls get COMPONENT_UNMOUNTED. Unregistering twice does nothing.
func (h *Handle) Unregister() {
	r := h.r
	r.mu.Lock()
	if h.reg.status != Active || r.closed {
		r.mu.Unlock()
		return
	}
	now := r.now()
	r.unregisterLocked(h.reg, now)
	r.unlockAndDrain()
	r.observeUnregistered(h.reg) // observe: the registration is gone
	r.audit(AuditEvent{Type: AuditUnregistration, RegistrationID: h.reg.id, At: now})
}

// Invalidate bumps the surface version without changing anything, so
// consumers re-discover. It does nothing on a dead handle.
func (h *Handle) Invalidate() {
	r := h.r
	r.mu.Lock()
	if h.reg.status != Active || r.closed {
		r.mu.Unlock()
		h.warnDead("Invalidate")
		return
	}
	r.bumpLocked()
	r.unlockAndDrain()
}

func (h *Handle) warnDead(op string) {
	if h.r.env.IsDev() {
		h.r.log.Warn("surface: "+op+" on a registration that is not active", "registrationId", h.reg.id)
	}
}

// Update pushes dynamic state: the disabled flag and per-capability
// availability overrides. Only these are updatable; anything structural
// needs a new registration. A call that changes something bumps the
// surface version once; each new or different override emits
// availability-changed. Overrides are keyed by capability name (or full
// capability id) and cannot be removed: set Available true to stop one
// from blocking.
type Update struct {
	// Disabled, when non-nil, sets the component's disabled flag: a
	// disabled component's capabilities are visible but unavailable
	// ("component-disabled").
	Disabled *bool
	// Availability sets overrides by capability name.
	Availability map[string]Availability
}

// Update applies u. It does nothing on a dead handle.
func (h *Handle) Update(u Update) {
	r := h.r
	r.mu.Lock()
	if h.reg.status != Active || r.closed {
		r.mu.Unlock()
		h.warnDead("Update")
		return
	}
	old := h.reg.st
	st := &regState{disabled: old.disabled, overrides: old.overrides}
	changed, cloned := false, false
	if u.Disabled != nil && *u.Disabled != old.disabled {
		st.disabled = *u.Disabled
		changed = true
	}
	for _, key := range slices.Sorted(maps.Keys(u.Availability)) {
		a := u.Availability[key]
		if prev, ok := old.overrides[key]; ok && prev == a {
			continue
		}
		if !cloned { // published states are immutable
			st.overrides = make(map[string]Availability, len(old.overrides)+len(u.Availability))
			maps.Copy(st.overrides, old.overrides)
			cloned = true
		}
		st.overrides[key] = a
		changed = true
		emitLocked(r, AvailabilityChanged{RegistrationID: h.reg.id, CapabilityID: h.reg.capabilityID(key), Available: a.Available})
	}
	if changed {
		h.reg.st = st
		r.bumpLocked()
	}
	r.unlockAndDrain()
}

// capabilityID resolves an override key (a name or a full id) to a
// capability id, else returns the key.
func (reg *registration) capabilityID(key string) string {
	for i := range reg.caps {
		if reg.caps[i].name == key || reg.caps[i].id == key {
			return reg.caps[i].id
		}
	}
	return key
}

// override returns the override that applies to capability c, if any.
func (st *regState) override(c *regCap) (Availability, bool) {
	if a, ok := st.overrides[c.name]; ok {
		return a, true
	}
	a, ok := st.overrides[c.id]
	return a, ok
}

// Refresh re-evaluates the When predicates of the registration's
// capabilities and pushes what changed since the last Refresh (the first
// Refresh compares against "available"): one availability-changed event per
// flipped capability and, if anything flipped, one version bump. Go apps
// have no render loop, so call Refresh when the state behind a When
// changes; event-driven adapters (MCP tools/list_changed) then see it.
func (h *Handle) Refresh() {
	r, reg := h.r, h.reg
	if len(reg.caps) == 0 {
		return
	}
	now := make([]bool, len(reg.caps))
	for i := range reg.caps {
		now[i], _ = evalWhen(reg.caps[i].def, r.log) // user code: outside the lock
	}
	r.mu.Lock()
	if reg.status != Active || r.closed {
		r.mu.Unlock()
		h.warnDead("Refresh")
		return
	}
	st := reg.st
	changed := false
	for k := range reg.caps {
		before := !reg.caps[k].whenOff
		if now[k] == before {
			continue
		}
		reg.caps[k].whenOff = !now[k]
		changed = true
		avail := now[k] && !st.disabled
		if a, ok := st.override(&reg.caps[k]); ok && !a.Available {
			avail = false
		}
		emitLocked(r, AvailabilityChanged{RegistrationID: reg.id, CapabilityID: reg.caps[k].id, Available: avail})
	}
	if changed {
		r.bumpLocked()
	}
	r.unlockAndDrain()
}

// evalWhen runs a capability's When predicate. It returns whether the
// capability is available by When, and whether When panicked.
func evalWhen(d *capDef, log *slog.Logger) (ok, panicked bool) {
	if d.when == nil {
		return true, false
	}
	defer func() {
		if p := recover(); p != nil {
			log.Warn("surface: When panicked; the capability counts as unavailable", "panic", fmt.Sprint(p))
			ok, panicked = false, true
		}
	}()
	return d.when(), false
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
	r.closedFlag.Store(true)
	if r.closingCh == nil {
		r.closingCh = make(chan struct{})
	}
	close(r.closingCh)
	gone := r.liveByType(r.entries.live()) // observe: what Close removes, reported below
	for _, reg := range r.entries.live() {
		reg.status = Unregistered
		r.stopCtxLocked(reg)
		if ch := r.abortInflightLocked(reg, true); ch != nil {
			r.unmounting = append(r.unmounting, ch)
		}
	}
	unmounting := r.unmounting
	r.unmounting = nil
	r.entries.reset()
	r.byType, r.byProc, r.emptyGroups, r.lastGroup = nil, nil, 0, nil
	r.tombs = tombstones{}
	if r.scPending { // no surface-changed after Close
		r.queue = slices.DeleteFunc(r.queue, func(e Event) bool { _, sc := e.(SurfaceChanged); return sc })
		r.scPending = false
	}
	r.unlockAndDrain()
	r.observeClosed(gone) // observe: the registrations removed
	r.confirm.closeAll()  // pending confirmations expire; their events still go out
	r.listeners.Store(nil)
	r.ctxWG.Wait()
	for _, ch := range unmounting { // inline handlers, on their callers' goroutines
		<-ch
	}
	r.execWG.Wait() // isolated handlers and deadline watches, on goroutines of their own
	return nil
}

// Done returns a channel that is closed when Close begins, for adapters
// that hold per-registry resources.
func (r *Registry) Done() <-chan struct{} { return r.closing() }

// closing returns a channel closed by Close.
func (r *Registry) closing() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closingLocked()
}

func (r *Registry) closingLocked() <-chan struct{} {
	if r.closingCh == nil {
		r.closingCh = make(chan struct{})
	}
	return r.closingCh
}

// tombstone remembers an unregistered registration: ids and when it was
// unregistered, never anything executable.
type tombstone struct {
	regID    string
	typ      string
	instance string
	ids      string    // registration.ids: the view capability ids follow regID
	procIDs  []string  // procedure reference ids
	at       time.Time // when unregistered
}

// lists reports whether the tombstone's registration had the capability.
// A view id is found in ids at an id boundary: ':' occurs in ids only in
// the "view:" that starts each view id, so a match starts at a boundary,
// and it ends at one when the text after it is empty or another id.
func (ts *tombstone) lists(capID string) bool {
	if !strings.HasPrefix(capID, "view:") {
		return slices.Contains(ts.procIDs, capID)
	}
	rest := ts.ids[len(ts.regID):]
	for {
		i := strings.Index(rest, capID)
		if i < 0 {
			return false
		}
		rest = rest[i+len(capID):]
		if rest == "" || strings.HasPrefix(rest, "view:") {
			return true
		}
	}
}

// tombstones is a FIFO ring bounded by size and TTL. Entries expire in
// insertion order because the TTL is constant, so expiry only ever drops
// the oldest.
type tombstones struct {
	ring    []tombstone
	head, n int
	ttl     time.Duration // Limits.TombstoneTTL, set by the first add
}

// live reports whether ts has not expired at now. (A subtraction of
// monotonic readings, where a deadline would take a Time.Add per
// tombstone.)
func (t *tombstones) live(ts *tombstone, now time.Time) bool { return now.Sub(ts.at) < t.ttl }

// at returns the i-th oldest tombstone, 0 ≤ i < len(t.ring). (A compare
// instead of a modulo: a division by a variable is slow.)
func (t *tombstones) at(i int) *tombstone {
	if i += t.head; i >= len(t.ring) {
		i -= len(t.ring)
	}
	return &t.ring[i]
}

func (t *tombstones) popOldest() {
	t.ring[t.head] = tombstone{}
	if t.head++; t.head == len(t.ring) {
		t.head = 0
	}
	t.n--
}

func (t *tombstones) add(ts tombstone, now time.Time, lim *Limits) {
	ts.at, t.ttl = now, lim.TombstoneTTL
	for t.n > 0 && !t.live(t.at(0), now) {
		t.popOldest()
	}
	for t.n > 0 && t.n >= lim.TombstoneSize {
		t.popOldest()
	}
	if t.n == len(t.ring) { // grow (up to the size limit), oldest first
		grown := make([]tombstone, min(max(8, 2*len(t.ring)), lim.TombstoneSize))
		for i := range t.n {
			grown[i] = *t.at(i)
		}
		t.ring, t.head = grown, 0
	}
	*t.at(t.n) = ts
	t.n++
}

// byRegistration returns the live tombstone of a registration id.
func (t *tombstones) byRegistration(regID string, now time.Time) (tombstone, bool) {
	for i := t.n - 1; i >= 0; i-- {
		if ts := t.at(i); ts.regID == regID && t.live(ts, now) {
			return *ts, true
		}
	}
	return tombstone{}, false
}

// listing reports whether a live tombstone lists the capability id.
func (t *tombstones) listing(capID string, now time.Time) bool {
	for i := t.n - 1; i >= 0; i-- {
		if ts := t.at(i); t.live(ts, now) && ts.lists(capID) {
			return true
		}
	}
	return false
}

// len returns the number of stored tombstones, expired ones included.
func (t *tombstones) len() int { return t.n }

// freezeMeta encodes a meta record as canonical JSON within the byte limit.
func freezeMeta(m map[string]any, field string, max int) (JSONText, *DefinitionError) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return "", &DefinitionError{Code: InvalidDefinition, Field: field, Message: "meta must be a JSON record", Err: err}
	}
	if len(b) > max {
		return "", defErr(LimitExceeded, field, fmt.Sprintf("meta is %d bytes, more than the limit of %d", len(b), max))
	}
	return JSONText(b), nil
}
