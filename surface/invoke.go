package surface

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// Invocation is a request to call a capability. Its JSON form uses the
// spec's field names.
type Invocation struct {
	// InvocationID is the idempotency key; adapters pass their tool-call
	// id. A fresh "inv_" id is minted when empty.
	InvocationID string `json:"invocationId,omitempty"`
	// CapabilityID is "view:…" or "domain:…".
	CapabilityID string `json:"capabilityId"`
	// InstanceID picks the instance when several are live.
	InstanceID string `json:"instanceId,omitempty"`
	// RegistrationID is the staleness token from discovery; adapters
	// should always send it.
	RegistrationID string `json:"registrationId,omitempty"`
	// SurfaceVersion is a version hint, enforced only for destructive and
	// external-side-effect procedures.
	SurfaceVersion string `json:"surfaceVersion,omitempty"`
	// Input is the JSON input of an action or procedure; ignored (but
	// fingerprinted) for observations. Empty means none.
	Input json.RawMessage `json:"input,omitempty"`
	// ConfirmationID is evidence from a resolved confirmation.
	ConfirmationID string `json:"confirmationId,omitempty"`
}

// InvokeOptions carry who calls and how long they wait.
type InvokeOptions struct {
	// Consumer is the caller; zero means the anonymous embedded consumer.
	// Adapters serving several consumers must pass a stable one each.
	Consumer Consumer
	// Timeout overrides the capability's timeout and the limits' default.
	Timeout time.Duration
}

// Result is the outcome of an invocation: status "ok" with an optional
// output, or "error" with an agent-facing *Error. Its JSON encoding is the
// spec's result envelope. A Result is the caller's: changing it changes
// nothing in the registry.
type Result struct {
	Status       ResultStatus `json:"status"`
	InvocationID string       `json:"invocationId"`
	// CapabilityID echoes the request verbatim.
	CapabilityID string `json:"capabilityId"`
	// Output is the handler's JSON output; empty when there is none.
	Output JSONText `json:"output,omitempty"`
	// Error is set iff Status is "error".
	Error *Error `json:"error,omitempty"`
	// SurfaceVersion is the version at settlement.
	SurfaceVersion string `json:"surfaceVersion"`
	// SurfaceChanged is set when the version moved during the call: the
	// agent should re-discover.
	SurfaceChanged bool `json:"surfaceChanged,omitempty"`
}

// Err returns nil for an ok result and the *Error otherwise.
func (res Result) Err() error {
	if res.Error == nil {
		return nil
	}
	return res.Error
}

// Decode unmarshals the output into v. It fails for error results.
func (res Result) Decode(v any) error {
	if res.Error != nil {
		return res.Error
	}
	if res.Output == "" {
		return errors.New("surface: the result has no output")
	}
	return json.Unmarshal([]byte(res.Output), v)
}

// detail reasons and fixed agent-facing messages.
const (
	msgHandlerError   = "The capability failed while running; the cause was recorded for the operator."
	msgOutputInvalid  = "The capability returned output that does not match its declared output schema."
	msgOutputTooLarge = "The capability's output is larger than the configured limit."
	msgQueueFull      = "Too many calls are waiting for this capability; retry after details.retryAfterMs milliseconds."
	msgInvalidJSON    = "input is not valid JSON"
	msgShape          = "input does not match the expected shape"
)

// Invoke calls a capability through the fixed pipeline: identity,
// resolution, availability, authorization, effective input, invoke policy
// and confirmation, precondition, admission, execution, settlement. The
// first failing phase decides the result.
//
// Invoke never panics on agent input and never returns a Go error: every
// outcome, including CONFIRMATION_REQUIRED, is a Result. Handlers get a
// context derived from ctx that ends on timeout, cancellation, unmount or
// Close; the first settlement wins and a later handler return is only
// audited as late-settlement. Handlers run on the calling goroutine, so a
// handler that ignores its context delays Invoke (not its outcome) until
// it returns; [Options.IsolateHandlers] runs them on their own goroutine
// instead, and Invoke then returns at the first settlement.
//
// A call with an invocation id this consumer already used joins the
// in-flight call or replays its cached result if the request is the same,
// and fails INVOCATION_CONFLICT if it differs.
func (r *Registry) Invoke(ctx context.Context, inv Invocation, opts InvokeOptions) Result {
	p := r.pipes.Get().(*pipeline) // zeroed by recycle, but for keep
	if p.keep.lane == 0 {
		p.keep.lane = r.lanes.Add(1) // a new pipeline; lane 0 is the registry's own
	}
	p.r, p.ctx, p.inv, p.opts, p.start = r, ctx, inv, opts, r.now()
	res := p.invoke()
	p.recycle()
	return res
}

// invoke runs the invocation; its Result is the caller's own.
func (p *pipeline) invoke() Result {
	r, inv := p.r, &p.inv
	p.consumer = p.opts.Consumer.normalized()
	p.consumerKey = p.keep.key(p.consumer)
	p.id = inv.InvocationID
	if p.id == "" {
		p.id = NewInvocationID()
	}
	p.startVersion = r.version.Load()
	if r.closedFlag.Load() {
		return p.result(cancelledByClose())
	}
	p.canonInput, p.inputErr = p.canonicalInput(inv.Input)

	// Phase 1: identity.
	key := dedupeKey{kind: p.consumer.Kind, consumer: p.consumer.ID, invocationID: p.id}
	fp, buf := fingerprint(r.fpSeed, p.keep.fp[:0], inv, p.canonInput, p.inputErr)
	p.keep.fp = buf
	entry, hit, joined := r.dedupe.begin(key, r.fpSeed, fp, p.start, &p.replay)
	if hit != dedupeMiss {
		return p.known(entry, hit, joined)
	}
	emit(r, InvocationStarted{InvocationID: p.id, CapabilityID: inv.CapabilityID, ConsumerID: p.consumer.ID})
	p.observeStart() // observe: the invocation starts; p.ctx may become the observer's

	res := p.run()
	cache := errorMatrix[codeOf(res)].cached || res.Error == nil
	if p.devDefect {
		cache = false
	}
	// The handler's return is the settlement time when no policy wrapped
	// it (what follows is the runtime's own work): one clock read fewer.
	end := p.returned
	if end.IsZero() || p.pol != nil {
		end = r.now()
	}
	r.dedupe.finish(entry, res, cache, end, r.limits.DedupeCacheTTL)
	p.settledAt(res, end, p.level != AuditNone || p.phase2Failed)
	return res.clone()
}

// recycle returns p to the registry's pool when nothing can reach it any
// more. What a handler may keep (its Call and context) lives in
// handlerState, which is never reused. A pipeline is kept out of the pool
// when its handler may still run (IsolateHandlers) or when it went through
// policies, whose Next closures user code could call late.
func (p *pipeline) recycle() {
	if p.r.isolate || p.pol != nil {
		return
	}
	r := p.r
	keep := p.keep
	*p = pipeline{}
	if cap(keep.canon) <= maxKeptInput && cap(keep.fp) <= maxKeptInput {
		p.keep = keep
	} else {
		p.keep.lane = keep.lane
	}
	r.pipes.Put(p)
}

// maxKeptInput bounds the input buffer a pooled pipeline keeps.
const maxKeptInput = 4 << 10

// pipeKeep is what a pipeline keeps when it is reused: buffers, and the
// key of the last consumer it served.
type pipeKeep struct {
	lane    uint32            // its audit lane modulo maxMemLanes: the registry's next when made (pools are per processor), moved off a busy one; 0 until made
	canon   []byte            // canonical input
	fp      []byte            // the request text the fingerprint hashes
	scratch canonical.Scratch // canonicalization's working buffers
	kind    ConsumerKind      // of the last consumer served
	id      string
	ckey    string // its Key()
}

// key returns c.Key() for a normalized c, reusing the last one's when
// kind and id are the same (strings are immutable: sharing is safe).
func (k *pipeKeep) key(c Consumer) string {
	if k.ckey == "" || c.Kind != k.kind || c.ID != k.id {
		k.kind, k.id, k.ckey = c.Kind, c.ID, c.Key()
	}
	return k.ckey
}

// known answers a call whose key the dedupe cache knows: it joins the
// call in flight, replays the cached result or fails INVOCATION_CONFLICT.
// (Its own function keeps the common path's stack frame small.)
func (p *pipeline) known(entry *dedupeEntry, hit dedupeHit, joined <-chan struct{}) Result {
	r := p.r
	switch hit {
	case dedupeJoin:
		select {
		case <-joined:
			return entry.result.clone()
		case <-p.ctx.Done():
			return p.result(NewError(Cancelled, "", nil))
		case <-r.closing():
			return p.result(NewError(Cancelled, "The surface was closed.", nil).withRetry(RetryNo))
		}
	case dedupeReplay:
		return p.replay.clone()
	}
	emit(r, InvocationStarted{InvocationID: p.id, CapabilityID: p.inv.CapabilityID, ConsumerID: p.consumer.ID})
	p.observeStart() // observe: the invocation starts (and settles below, in settled)
	res := p.result(NewError(InvocationConflict, "", map[string]any{"reason": "id-reused-with-different-request"}))
	p.settled(res, true)
	return res
}

func codeOf(res Result) Code {
	if res.Error == nil {
		return ""
	}
	return res.Error.Code
}

// withRetry returns e with another retry category.
func (e *Error) withRetry(r Retry) *Error {
	e.Retry = r
	return e
}

// clone returns a Result whose error details are the caller's own.
func (res Result) clone() Result {
	res.Error = res.Error.clone()
	return res
}

// pipeline is the state of one invocation.
type pipeline struct {
	r            *Registry
	ctx          context.Context
	inv          Invocation
	opts         InvokeOptions
	consumer     Consumer
	consumerKey  string
	id           string
	start        time.Time
	startVersion uint64
	canonInput   []byte // canonical input; nil when absent
	inputErr     error  // the input is not JSON

	// Set as the phases run.
	reg          *registration
	capIdx       int
	st           *regState
	level        AuditLevel
	phase2Failed bool
	effInput     []byte         // canonical effective input, once validated
	reserved     *confirmRecord // approved evidence held for this call
	consumed     bool
	admitted     bool // holds an admission slot
	queueWait    time.Duration
	waited       bool      // queued for admission
	returned     time.Time // when an inline handler returned (real clock only)
	queued       bool
	execution    time.Duration
	executed     bool
	pol          *policyState  // set when the capability has policies
	exec         execution     // phase 9
	ms           [3]int64      // the settled record's durations, when the sinks copy them
	budget       time.Duration // the execution's timeout
	hs           *handlerState // from authorization on
	replay       Result        // a cached result being replayed
	keep         pipeKeep      // kept across reuse
	devDefect    bool
	rec          InvocationRecorder // observe: the Observer's recorder of this invocation, or nil
}

func (p *pipeline) cap() *regCap { return &p.reg.caps[p.capIdx] }

// handlerState is what user code may keep after the invocation: the Call
// and the handler's context. Unlike the pipeline it is never reused.
type handlerState struct {
	call Call
	hctx handlerCtx // the handler's context when it runs inline
}

// policyState holds the contexts policies see, allocated together.
type policyState struct {
	pc PolicyContext
	ic InvokeContext
}

// result builds the envelope of a settled invocation.
func (p *pipeline) result(e *Error) Result {
	res := Result{Status: StatusOK, InvocationID: p.id, CapabilityID: p.inv.CapabilityID}
	if e != nil {
		res.Status, res.Error = StatusError, e
	}
	v := p.r.version.Load()
	res.SurfaceVersion = p.r.versionString(v)
	res.SurfaceChanged = v != p.startVersion
	return res
}

// settled emits invocation-settled and, if audit is true, the audit record.
func (p *pipeline) settled(res Result, audit bool) { p.settledAt(res, p.r.now(), audit) }

func (p *pipeline) settledAt(res Result, end time.Time, audit bool) {
	r := p.r
	d := end.Sub(p.start)
	code := codeOf(res)
	emit(r, InvocationSettled{InvocationID: p.id, CapabilityID: p.inv.CapabilityID, Status: res.Status, Code: code, DurationMs: d.Milliseconds()})
	p.observeSettled(&res, d) // observe: the settlement, with the durations the audit records
	if !audit {
		return
	}
	ms := &p.ms // the record points here: the sinks copy what it points to
	if !r.sinksCopy {
		ms = new([3]int64) // another sink may keep the pointers
	}
	ms[0] = d.Milliseconds()
	ev := AuditEvent{
		Type: AuditInvocationSettled, At: end, CapabilityID: p.inv.CapabilityID, InvocationID: p.id,
		ConsumerID: p.consumerKey, Status: res.Status, Code: code, DurationMs: &ms[0],
	}
	if p.reg != nil {
		ev.RegistrationID = p.reg.id
	}
	if p.queued {
		ms[1] = p.queueWait.Milliseconds()
		ev.QueueWaitMs = &ms[1]
	}
	if p.executed {
		ms[2] = p.execution.Milliseconds()
		ev.ExecutionMs = &ms[2]
	}
	if p.level == AuditFull {
		ev.Payload = r.payload(p.inv.CapabilityID, JSONText(p.effInput), res.Output)
	}
	p.keep.lane = r.auditLane(&ev, p.keep.lane)
}

// payload builds a full-level audit payload: redacted, then capped.
func (r *Registry) payload(capabilityID string, input, output JSONText) *AuditPayload {
	pl := AuditPayload{Input: input, Output: output}
	if r.redact != nil {
		func() {
			defer func() {
				if rec := recover(); rec != nil {
					r.log.Error("surface: audit redact hook panicked; payload dropped", "capabilityId", capabilityID)
					pl = AuditPayload{Truncated: true}
				}
			}()
			pl = r.redact(capabilityID, pl)
		}()
	}
	for _, part := range []*JSONText{&pl.Input, &pl.Output} {
		if len(*part) > r.limits.MaxOutputBytes {
			*part, pl.Truncated = "", true
		}
	}
	if pl == (AuditPayload{}) {
		return nil
	}
	return &pl
}

// run executes phases 2 to 10.
func (p *pipeline) run() Result {
	r := p.r
	// Phase 2: resolution.
	if e := p.resolve(); e != nil {
		p.phase2Failed = true
		return p.result(e)
	}
	p.observeResolved() // observe: kind, effect, registration and instance are known
	c := p.cap()
	d := c.def
	p.level = d.audit
	if p.level != AuditNone {
		p.auditStarted()
	}
	defer func() {
		if p.reserved != nil && !p.consumed {
			r.confirm.release(p.reserved) // failed before executing: the approval stands
		}
	}()

	// Phase 3: availability, live.
	if ok, reason := r.availability(p.st, c); !ok {
		return p.result(NewError(CapabilityNotAvailable, "", map[string]any{"reason": reason}))
	}

	// Phase 4: authorization. The host context is read once. Discovery is
	// re-run first, so a capability hidden from this consumer is
	// indistinguishable from one that does not exist.
	host := r.hostContext()
	p.hs = &handlerState{call: Call{CapabilityID: c.id, RegistrationID: p.reg.id, InvocationID: p.id, Consumer: p.consumer, Host: host}}
	call := &p.hs.call
	if len(c.chain) == 0 {
		return p.finish(p.afterAuthorize(p.ctx, call, nil))
	}
	return p.authorize(c, call, host)
}

// auditStarted records invocation-started. (Separate functions keep the
// records and the policy contexts, which are large, off the stack frames
// of the common path.)
func (p *pipeline) auditStarted() {
	p.keep.lane = p.r.auditLane(&AuditEvent{Type: AuditInvocationStarted, At: p.start, CapabilityID: p.inv.CapabilityID,
		RegistrationID: p.reg.id, InvocationID: p.id, ConsumerID: p.consumerKey}, p.keep.lane)
}

// authorize runs phase 4 for a capability with policies: discovery again,
// then the authorize hooks around the later phases.
func (p *pipeline) authorize(c *regCap, call *Call, host map[string]any) Result {
	r := p.r
	p.pol = &policyState{pc: PolicyContext{Consumer: p.consumer, Host: host, Environment: r.env, r: r}}
	pc := &p.pol.pc
	pc.fill(p.reg, c)
	if c.discovers {
		switch dec := r.discover(c.chain, pc); dec.verdict {
		case hide:
			return p.result(NewError(CapabilityNotFound, "", nil))
		case disable:
			return p.result(NewError(CapabilityNotAvailable, "", map[string]any{"reason": dec.reason}))
		}
	}
	if !c.authorizes {
		return p.finish(p.afterAuthorize(p.ctx, call, pc))
	}
	res := onion(p, p.ctx, c.chain, func(pol *Policy) func(context.Context, *PolicyContext, Next) Result { return pol.Authorize }, pc,
		func(ctx context.Context) Result { return p.afterAuthorize(ctx, call, pc) })
	return p.finish(res)
}

// finish gives a result that came through policies the envelope of this
// invocation.
func (p *pipeline) finish(res Result) Result {
	if res.Error != nil {
		return p.result(res.Error)
	}
	out := p.result(nil)
	out.Output = res.Output
	return out
}

// afterAuthorize runs phases 5 to 10.
func (p *pipeline) afterAuthorize(ctx context.Context, call *Call, pc *PolicyContext) Result {
	c := p.cap()
	d := c.def
	p.ctx = ctx

	// Phase 5: effective input.
	var in, value any
	switch d.kind {
	case kindAction:
		var e *Error
		if in, value, e = p.effectiveInput(d); e != nil {
			return p.result(e)
		}
	case kindProcedure:
		eff, v, e := p.procedureInput(d, c.x.bound)
		if e != nil {
			return p.result(e)
		}
		p.effInput, in, value = eff, eff, v
	}

	// Phase 6: invoke policies, innermost the confirmation gate.
	if !c.invokes {
		return p.afterInvokePolicies(ctx, call, in, nil)
	}
	return p.invokePolicies(ctx, call, pc, in, value)
}

// invokePolicies runs the invoke hooks around the later phases.
func (p *pipeline) invokePolicies(ctx context.Context, call *Call, pc *PolicyContext, in, value any) Result {
	c := p.cap()
	if value == nil && c.def.kind == kindObservation {
		value = map[string]any{} // observations take no input: policies see {}
	}
	ic := &p.pol.ic
	*ic = InvokeContext{PolicyContext: *pc, InvocationID: p.id, Input: value}
	return onion(p, ctx, c.chain, func(pol *Policy) func(context.Context, *InvokeContext, Next) Result { return pol.Invoke }, ic,
		func(ctx context.Context) Result { return p.afterInvokePolicies(ctx, call, in, ic) })
}

// afterInvokePolicies runs the confirmation gate and phases 7 to 10.
func (p *pipeline) afterInvokePolicies(ctx context.Context, call *Call, in any, ic *InvokeContext) Result {
	d := p.cap().def
	p.ctx = ctx
	if d.kind != kindObservation {
		if e := p.confirmationGate(call, ic); e != nil {
			return p.result(e)
		}
	}

	// Phase 7: precondition.
	if d.kind == kindAction && d.precondition != nil {
		if e := p.precondition(d, call, in); e != nil {
			return p.result(e)
		}
	}

	// Phase 8: admission.
	if e := p.admit(d); e != nil {
		return p.result(e)
	}
	defer p.release(d)

	// Phase 9: execution.
	out, e := p.execute(d, call, in)
	if e != nil {
		return p.result(e)
	}

	// Phase 10: settlement.
	output, e := p.output(d, out)
	if e != nil {
		return p.result(e)
	}
	res := p.result(nil)
	res.Output = output
	return res
}

// confirmationGate decides whether the call needs the user's approval and,
// if so, requests it or checks the evidence sent (semantics §13.1). An
// approved, matching confirmation is reserved for this call and handed to
// the handler; it is consumed when execution starts.
func (p *pipeline) confirmationGate(call *Call, ic *InvokeContext) *Error {
	r, c := p.r, p.cap()
	d := c.def
	level := d.confirmation
	var composer func(any) string // of the first active escalation that has one
	for i := range c.chain {
		esc := c.chain[i].escalate
		if esc == nil || !p.escalationActive(esc, ic) {
			continue
		}
		level = ConfirmRequired
		if composer == nil {
			composer = esc.summary
		}
	}
	if level != ConfirmRequired {
		return nil // a confirmationId sent anyway is ignored, not consumed
	}
	digest := confirmationDigest(r.surfaceID, p.reg.id, c.id, p.consumerKey, d.effect, p.effInput)
	required := func(v PendingConfirmation) *Error {
		return NewError(ConfirmationRequired, "", map[string]any{
			"confirmationId": v.ConfirmationID, "summary": v.Summary,
			"expiresAt": v.ExpiresAt.UTC().Format(timeLayout), "effect": string(v.Effect), "origin": "client",
		})
	}
	if id := p.inv.ConfirmationID; id != "" {
		rec, pending, e := r.confirm.reserve(id, digest)
		p.observePresented(id, rec, pending) // observe: the evidence was checked (accepted iff rec != nil)
		switch {
		case e != nil:
			return e
		case pending != nil:
			return required(*pending)
		}
		p.reserved = rec
		call.Confirmation = &Evidence{ID: id, ApprovedAt: rec.approvedAt}
		return nil
	}
	view := PendingConfirmation{
		CapabilityID: c.id, RegistrationID: p.reg.id, ConsumerKey: p.consumerKey,
		Effect: d.effect, Summary: p.summary(composer, ic), Input: JSONText(p.effInput),
	}
	view, e := r.confirm.request(view, digest)
	if e != nil {
		return e
	}
	p.observeRequested(view) // observe: the user's approval is requested
	return required(view)
}

// escalationActive evaluates a RequireConfirmation condition; one that
// panics counts as active (fail closed).
func (p *pipeline) escalationActive(esc *escalation, ic *InvokeContext) (active bool) {
	if esc.when == nil {
		return true
	}
	defer func() {
		if rec := recover(); rec != nil {
			p.r.log.Error("surface: confirmation condition panicked; confirmation is required", "capabilityId", p.inv.CapabilityID, "panic", fmt.Sprint(rec))
			active = true
		}
	}()
	return esc.when(ic)
}

// summary composes what the user is asked to approve: the composer's text,
// else the description and the effective input.
func (p *pipeline) summary(composer func(any) string, ic *InvokeContext) (s string) {
	d := p.cap().def
	if composer == nil || ic == nil {
		return clip(d.description+" — input: "+string(p.effInput), maxMessage)
	}
	defer func() {
		if rec := recover(); rec != nil {
			s = clip(d.description, maxMessage)
		}
	}()
	return clip(composer(ic.Input), maxMessage)
}

// hostContext reads the host context once; a panicking provider gives an
// empty context.
func (r *Registry) hostContext() (host map[string]any) {
	if r.hostCtx == nil {
		return nil
	}
	defer func() {
		if rec := recover(); rec != nil {
			r.log.Error("surface: host context provider panicked", "panic", fmt.Sprint(rec))
			host = map[string]any{}
		}
	}()
	return r.hostCtx()
}

// canonicalInput canonicalises the request input; nil input stays nil.
// canonicalInput canonicalizes the input into the pipeline's buffer. The
// result is only read during the invocation: whatever outlives it (audit
// payloads, confirmation records, messages) is a copy.
func (p *pipeline) canonicalInput(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out, err := p.keep.scratch.AppendCanonicalize(p.keep.canon[:0], raw)
	if err != nil {
		return nil, err
	}
	p.keep.canon = out
	return out, nil
}

// fingerprint hashes the request as issued (semantics §5): the canonical
// JSON of capabilityId, registrationId, instanceId, surfaceVersion, input
// and confirmationId, absent as null. Input that is not JSON, and ids that
// are not UTF-8, are hashed as hex behind a NUL byte, which no canonical
// JSON contains.
//
// The hash is the registry's seeded maphash rather than the spec's
// fnv1a64: a fingerprint is only ever compared with another of the same
// registry (it never leaves the process), maphash is an order of magnitude
// faster on this path, and a secret seed means no caller can craft two
// requests whose fingerprints collide. It returns the hash and buf grown
// with the text, for reuse.
func fingerprint(seed maphash.Seed, buf []byte, inv *Invocation, canonInput []byte, inputErr error) (uint64, []byte) {
	b := append(buf, `{"capabilityId":`...)
	b = appendJSONOrNull(b, inv.CapabilityID)
	b = append(b, `,"confirmationId":`...)
	b = appendJSONOrNull(b, inv.ConfirmationID)
	b = append(b, `,"input":`...)
	switch {
	case inputErr != nil:
		b = hex.AppendEncode(append(b, 0), inv.Input)
	case canonInput == nil:
		b = append(b, "null"...)
	default:
		b = append(b, canonInput...)
	}
	b = append(b, `,"instanceId":`...)
	b = appendJSONOrNull(b, inv.InstanceID)
	b = append(b, `,"registrationId":`...)
	b = appendJSONOrNull(b, inv.RegistrationID)
	b = append(b, `,"surfaceVersion":`...)
	b = appendJSONOrNull(b, inv.SurfaceVersion)
	b = append(b, '}')
	return maphash.Bytes(seed, b), b
}

func appendJSONOrNull(b []byte, s string) []byte {
	switch {
	case s == "":
		return append(b, "null"...)
	case plainASCII(s): // ids usually are: no escapes, no validation
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	case !utf8.ValidString(s):
		// Canonical JSON (and the UTF-16 hash) would fold invalid bytes
		// into U+FFFD and make distinct ids collide: hash them in hex
		// behind a NUL, which no canonical JSON contains.
		return hex.AppendEncode(append(b, 0), []byte(s))
	}
	return canonical.AppendString(b, s)
}

// plainASCII reports whether s is printable ASCII without '"' or '\\',
// so that its JSON string is s between quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// effectiveInput validates the action input and decodes it into the
// handler's type. It returns the typed input and the validated JSON value.
func (p *pipeline) effectiveInput(d *capDef) (any, any, *Error) {
	raw := p.canonInput
	if p.inputErr != nil {
		return nil, nil, invalidInput([]Issue{{Path: "", Message: msgInvalidJSON}})
	}
	if raw == nil {
		raw = []byte("null")
		if d.input.IsObject() {
			raw = []byte("{}") // no input for an object schema means an empty object
		}
	}
	// Most inputs are decided valid straight from the canonical text; the
	// decoded value is built when the check needs it (to report issues,
	// or for shapes the text check leaves alone) or policies will see it.
	var v any
	if !d.input.ValidCanonical(raw) || p.cap().invokes {
		var err error
		if v, err = canonical.Decode(raw); err != nil {
			return nil, nil, invalidInput([]Issue{{Path: "", Message: msgInvalidJSON}})
		}
		if issues := d.input.Validate(v); len(issues) > 0 {
			out := make([]Issue, len(issues))
			for i, is := range issues {
				out[i] = Issue{Path: is.Path, Message: is.Message}
			}
			return nil, nil, invalidInput(out)
		}
	}
	// Decode from the canonical text of the validated value: it spells
	// numbers the way Go decoders accept (1 rather than 1.0).
	in, err := d.decode(raw)
	if err != nil {
		return nil, nil, invalidInput([]Issue{{Path: "", Message: msgShape}})
	}
	p.effInput = raw
	return in, v, nil
}

func invalidInput(issues []Issue) *Error {
	return NewError(InvalidInput, "", map[string]any{"issues": issues})
}

// userError maps an error returned (or panic raised) by user code to the
// agent-facing error: an *Error anywhere in the chain is used as is;
// anything else becomes EXECUTION_FAILED handler-error, and its text goes
// only to the log.
func (p *pipeline) userError(err error, what string) *Error {
	var ae *Error
	if errors.As(err, &ae) && ae != nil {
		if e := wellFormed(ae); e != nil {
			return e
		}
	}
	p.r.log.Error("surface: "+what+" failed", "capabilityId", p.inv.CapabilityID, "invocationId", p.id, "error", err)
	return handlerError()
}

// wellFormed returns a copy of an error from user code fit for the agent:
// a known code, a message (the code's default when empty, capped), a retry
// category from the closed set. It returns nil for an unknown code.
func wellFormed(e *Error) *Error {
	rule, known := errorMatrix[e.Code]
	if !known {
		return nil
	}
	c := *e
	if c.Message == "" {
		c.Message = rule.message
	}
	c.Message = clip(c.Message, maxMessage)
	switch c.Retry {
	case RetryNo, RetryYes, RetryAfterRefresh, RetryAfterDelay, RetryWithConfirmation, RetryWithChanges:
	default:
		c.Retry = rule.retry
	}
	return &c
}

func handlerError() *Error {
	return NewError(ExecutionFailed, msgHandlerError, map[string]any{"reason": "handler-error"})
}

// panicError is the error a recovered panic becomes.
type panicError struct{ value any }

func (e panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// precondition runs the action's precondition.
func (p *pipeline) precondition(d *capDef, call *Call, in any) (e *Error) {
	defer func() {
		if rec := recover(); rec != nil {
			e = p.userError(panicError{rec}, "precondition")
		}
	}()
	if err := d.precondition(p.ctx, call, in); err != nil {
		return p.userError(err, "precondition")
	}
	return nil
}

// output settles a handler's return value: JSON-encoded, size-capped and
// validated against the output schema.
func (p *pipeline) output(d *capDef, out any) (JSONText, *Error) {
	if d.output == nil {
		return "", nil
	}
	buf := p.r.outBufs.Get().(*[]byte)
	b, err := marshalOutput((*buf)[:0], out)
	defer func() {
		if cap(b) <= maxPooledOutput { // keep no outsized buffer alive
			*buf = b[:0]
			p.r.outBufs.Put(buf)
		}
	}()
	if err != nil {
		p.outputDefect(err)
		return "", NewError(ExecutionFailed, msgOutputInvalid, map[string]any{"reason": "output-invalid"})
	}
	if jsonDepth(b) > maxJSONDepth {
		p.outputDefect(fmt.Errorf("output nests deeper than %d levels", maxJSONDepth))
		return "", NewError(ExecutionFailed, msgOutputInvalid, map[string]any{"reason": "output-invalid"})
	}
	if len(b) > p.r.limits.MaxOutputBytes {
		p.r.log.Error("surface: output too large", "capabilityId", p.inv.CapabilityID, "bytes", len(b), "limit", p.r.limits.MaxOutputBytes)
		return "", NewError(ExecutionFailed, msgOutputTooLarge, map[string]any{"reason": "output-too-large"})
	}
	if d.outputTyped {
		// The schema was inferred from the handler's Go type to describe
		// everything that type marshals to: checking again cannot fail.
		return JSONText(b), nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		p.outputDefect(err)
		return "", NewError(ExecutionFailed, msgOutputInvalid, map[string]any{"reason": "output-invalid"})
	}
	if issues := d.output.Validate(v); len(issues) > 0 {
		p.outputDefect(fmt.Errorf("output does not match the schema at %q: %s", issues[0].Path, issues[0].Message))
		return "", NewError(ExecutionFailed, msgOutputInvalid, map[string]any{"reason": "output-invalid"})
	}
	return JSONText(b), nil
}

// maxPooledOutput is the largest output buffer kept for reuse.
const maxPooledOutput = 64 << 10

// marshalOutput appends the JSON encoding of a handler's output to dst,
// with segmentio's encoder in encoding/json's configuration (HTML escaped,
// map keys sorted): the same bytes json.Marshal produces, at about half
// the cost.
func marshalOutput(dst []byte, out any) ([]byte, error) {
	return fastjson.Append(dst, out, fastjson.EscapeHTML|fastjson.SortMapKeys)
}

// outputDefect logs a handler that returned non-conforming output. In
// development and test the result is not cached, so the fixed handler
// can be retried with the same id.
func (p *pipeline) outputDefect(err error) {
	lvl := "surface: output is not valid for its schema"
	p.r.log.Error(lvl, "capabilityId", p.inv.CapabilityID, "invocationId", p.id, "error", err)
	if p.r.env.IsDev() {
		p.devDefect = true
	}
}

// resolve finds the target registration (semantics §9).
func (p *pipeline) resolve() *Error {
	r, inv := p.r, &p.inv
	id, ok := ParseCapabilityID(inv.CapabilityID)
	if !ok {
		return NewError(CapabilityNotFound, "", nil)
	}
	lane := p.keep.lane // the processor's: readers there share a slot
	waited := r.mu.RLock(lane)
	defer r.mu.RUnlock(lane, waited)
	var buf [4]*registration
	cands := buf[:0]
	var idx [4]int
	idxs := idx[:0]
	if id.Plane == ViewPlane {
		g := r.byType[id.Type]
		switch {
		case g == nil:
		case inv.InstanceID != "": // at most one live instance has the id
			if reg := g.instance(inv.InstanceID); reg != nil {
				if i := reg.capIndex(id.Name); i >= 0 {
					cands, idxs = append(cands, reg), append(idxs, i)
				}
			}
		default:
			for _, reg := range g.regs {
				if i := reg.capIndex(id.Name); i >= 0 {
					cands, idxs = append(cands, reg), append(idxs, i)
				}
			}
		}
	} else {
		for _, reg := range r.byProc[id.Path] {
			if i := reg.procIndex(id.Path); i >= 0 && (inv.InstanceID == "" || reg.instanceOf(i) == inv.InstanceID) {
				cands = append(cands, reg)
				idxs = append(idxs, i)
			}
		}
	}
	if len(cands) > 1 {
		cands, idxs = sortCandidates(cands, idxs)
	}
	pick := -1
	switch {
	case inv.RegistrationID != "":
		for i, c := range cands {
			if c.id == inv.RegistrationID {
				pick = i
			}
		}
		if pick < 0 {
			return r.notLive(inv, cands)
		}
	case len(cands) == 1:
		pick = 0
	default:
		return r.noneOrMany(inv, cands, idxs)
	}
	p.reg, p.capIdx = cands[pick], idxs[pick]
	p.st = r.stateLocked(p.reg)
	// The version gate: a stale hint only stops dangerous procedures.
	if e := p.reg.caps[p.capIdx].def.effect; inv.SurfaceVersion != "" && (e == Destructive || e == ExternalSideEffect) &&
		inv.SurfaceVersion != r.versionString(r.version.Load()) {
		return NewError(StaleCapability, "", map[string]any{"reason": "surface-version-mismatch"})
	}
	return nil
}

// instanceOf is what an instance id filters and sorts capability i by:
// the component's instance for view capabilities, the reference's context
// instance for procedures.
func (reg *registration) instanceOf(i int) string {
	if b := reg.caps[i].x.bound; b != nil {
		return b.context.InstanceID
	}
	return reg.instance
}

// sortCandidates orders candidates by instance, then registration id.
func sortCandidates(cands []*registration, idxs []int) ([]*registration, []int) {
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(cands[a].instanceOf(idxs[a]), cands[b].instanceOf(idxs[b])); c != 0 {
			return c
		}
		return strings.Compare(cands[a].id, cands[b].id)
	})
	sc, si := make([]*registration, len(cands)), make([]int, len(cands))
	for k, i := range order {
		sc[k], si[k] = cands[i], idxs[i]
	}
	return sc, si
}

// notLive is the failure of a call whose registration id names none of
// the live candidates: replaced, unmounted, reloaded or unknown.
func (r *Registry) notLive(inv *Invocation, cands []*registration) *Error {
	_, tomb := r.tombs.byRegistration(inv.RegistrationID, r.now())
	switch {
	case tomb && len(cands) > 0:
		return NewError(StaleCapability, "", map[string]any{"reason": "registration-replaced", "liveRegistrationId": cands[0].id})
	case tomb:
		return NewError(ComponentUnmounted, "", map[string]any{"phase": "resolve"})
	case len(cands) > 0:
		return NewError(StaleCapability, "", map[string]any{"reason": "surface-reloaded", "liveRegistrationId": cands[0].id})
	}
	return NewError(CapabilityNotFound, "", nil)
}

// noneOrMany is the failure of a call without a registration id that
// matches no live candidate or several.
func (r *Registry) noneOrMany(inv *Invocation, cands []*registration, idxs []int) *Error {
	if len(cands) == 0 {
		if r.tombs.listing(inv.CapabilityID, r.now()) {
			return NewError(ComponentUnmounted, "", map[string]any{"phase": "resolve"})
		}
		return NewError(CapabilityNotFound, "", nil)
	}
	refs := make([]InstanceRef, len(cands))
	for i, c := range cands {
		refs[i] = InstanceRef{InstanceID: c.instanceOf(idxs[i]), RegistrationID: c.id}
		if b := c.caps[idxs[i]].x.bound; b != nil {
			ctx := b.context
			refs[i].Context = &ctx
		} else {
			refs[i].Description = c.description
		}
	}
	return NewError(AmbiguousInstance, "", map[string]any{"instances": refs})
}

// procIndex returns the index of the procedure reference with path, or -1.
func (reg *registration) procIndex(path string) int {
	for i := int(reg.nView); i < len(reg.caps); i++ {
		if reg.caps[i].name == path {
			return i
		}
	}
	return -1
}

// capIndex returns the index of the named capability, or -1.
func (reg *registration) capIndex(name string) int {
	for i := range int(reg.nView) {
		if reg.caps[i].name == name {
			return i
		}
	}
	return -1
}

// stateLocked returns the current state of an active registration.
func (r *Registry) stateLocked(reg *registration) *regState {
	if reg.st == nil {
		return enabledState
	}
	return reg.st
}

// maxJSONDepth bounds the nesting of handler output (semantics §18).
const maxJSONDepth = 64

// jsonDepth returns the maximum nesting depth of valid JSON text.
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > deepest {
				deepest = depth
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
