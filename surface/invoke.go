package surface

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"
	"strconv"
	"time"
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
	// Client distinguishes the clients that act as one consumer (an
	// adapter's sessions, two MCP clients of one user): a confirmation
	// request binds to the client that asked, as to the consumer, so that
	// no other client of the consumer can present it as evidence (it
	// fails CONFIRMATION_INVALID mismatch) or be handed it (its identical
	// call opens a request of its own). Empty is the consumer's only
	// client. Idempotency keys stay the consumer's.
	Client string
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
	// GrantID is set when the call needed the user's approval and a
	// standing grant the host made let it through without asking ("gnt_"
	// + 12 base62): the grant whose use it spent as it executed. It is
	// absent otherwise, so the result of a call without a grant is what
	// it always was. It informs; no request can present it.
	GrantID string `json:"grantId,omitempty"`
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

// clone returns a Result whose error details are the caller's own.
func (res Result) clone() Result {
	res.Error = res.Error.clone()
	return res
}

// Invoke calls a capability through the fixed pipeline: identity,
// resolution, availability, authorization, effective input, invoke policy
// and confirmation, precondition, admission, execution, settlement. The
// first failing phase decides the result.
//
// Invoke never panics on agent input and never returns a Go error: every
// outcome, including CONFIRMATION_REQUIRED, is a Result. A panic in user
// code the pipeline runs (handlers, decoding of the input, encoding of the
// output, policies, preconditions, bindings, providers) is recovered and
// settles the call as that phase's error. Handlers get a context derived
// from ctx that ends on timeout, cancellation, unmount or Close; the first
// settlement wins and a later handler return is only audited as
// late-settlement. Handlers run on the calling goroutine, so a handler
// that ignores its context delays Invoke (not its outcome) until it
// returns; [Options.IsolateHandlers] runs them on their own goroutine
// instead, and Invoke then returns at the first settlement.
//
// A call with an invocation id this consumer already used joins the
// in-flight call or replays its cached result if the request is the same,
// and fails INVOCATION_CONFLICT if it differs.
//
// What an agent chooses is bounded before the registry keeps any of it:
// every id of the request is at most [MaxIDLength] bytes and the input at
// most [Limits].MaxInputBytes, checked before it is parsed. A capability
// or instance id that is longer names nothing (CAPABILITY_NOT_FOUND); any
// other id that is longer, or a larger input, fails INVALID_INPUT with an
// issue at the request field (details.field names it). Such a refusal is
// not remembered, audited or emitted as an event.
func (r *Registry) Invoke(ctx context.Context, inv Invocation, opts InvokeOptions) Result {
	a := r.newAttempt(inv, opts)
	if r.closing() {
		return a.result(r, cancelledByClose())
	}
	if !a.call.Consumer.Kind.Valid() {
		return a.result(r, r.unknownConsumer(a.call.Consumer))
	}

	// Phase 1: identity. The ids and the size of the input are checked
	// before anything is kept; then the request is recorded in flight
	// before any later work can be observed, and a known key joins,
	// replays or conflicts.
	if e := r.checkRequest(&a.inv); e != nil {
		return a.result(r, e)
	}
	a.canonicalInput()
	entry, hit, settled := r.dedupe.begin(a.key(), a.fingerprint(r.fpSeed), a.start)
	if hit != dedupeMiss {
		return r.known(ctx, a, entry, hit, settled)
	}
	a.consumerKey = entry.owner.key
	emit(r, InvocationStarted{InvocationID: a.id(), CapabilityID: inv.CapabilityID, ConsumerID: a.call.Consumer.ID})
	ctx = r.observeStart(ctx, a) // observe: the invocation starts; ctx may become the hook's

	// Phases 2 to 9, and the output check of phase 10.
	res := r.run(ctx, a)

	// Phase 10: settlement.
	return r.settle(ctx, a, entry, res)
}

// attempt is the state of one invocation, made by Invoke and passed from
// phase to phase. Phases fill in what they learn; nothing in it is shared
// with another invocation.
type attempt struct {
	inv          Invocation
	consumerKey  string // the consumer's key, once the identity phase made it
	start        time.Time
	startVersion uint64
	timeout      time.Duration // InvokeOptions.Timeout
	client       string        // InvokeOptions.Client
	input        []byte        // canonical input; nil when absent or not JSON
	inputBad     string        // why the input is not usable JSON (the message), or ""

	// What handlers see, by pointer (a handler may keep it): the
	// invocation id (sent or minted) and the consumer (normalized) from
	// the start, the rest once authorized (phase 4).
	call Call

	// Resolution (phase 2).
	reg *registration
	cap *regCap

	pc  *PolicyContext // what policies see (phase 4 on); nil without policies
	eff effective      // the effective input (phase 5)

	// Confirmation (phase 6), admission (8) and execution (9).
	evidence  *confirmRecord // approved evidence reserved for this call
	grant     *grantRecord   // the standing grant a use of which is reserved for this call
	group     *queueGroup    // the group of an action or procedure call, once admission joined it
	queueWait time.Duration
	execAt    time.Duration // when execution began, after start
	execution time.Duration // from then to the settlement
	exec      execution

	rec InvocationRecorder // observe: the Telemetry's recorder of this invocation, or nil

	unresolved bool // resolution failed: the settlement is audited anyway
	consumed   bool // the evidence or grant use is spent, execution having started
	queued     bool // reached admission
	admitted   bool // holds an admission slot
	executed   bool // reached execution
	devDefect  bool // the handler's output is not JSON (development): not cached
}

func (r *Registry) newAttempt(inv Invocation, opts InvokeOptions) *attempt {
	a := &attempt{
		inv:          inv,
		start:        r.now(),
		startVersion: r.version.Load(),
		timeout:      opts.Timeout,
		client:       opts.Client,
	}
	a.call.InvocationID, a.call.Consumer = inv.InvocationID, opts.Consumer.normalized()
	if a.call.InvocationID == "" {
		a.call.InvocationID = newInvocationID()
	}
	return a
}

// id is the invocation id, sent or minted.
func (a *attempt) id() string { return a.call.InvocationID }

// key is the attempt's idempotency key.
func (a *attempt) key() dedupeKey {
	return dedupeKey{kind: a.call.Consumer.Kind, consumer: a.call.Consumer.ID, invocationID: a.id()}
}

// capabilityID is the capability id as sent; once resolved, the
// registration's copy of it (the same text), which records that outlive
// the call share instead of keeping the caller's.
func (a *attempt) capabilityID() string {
	if a.cap != nil {
		return a.cap.id
	}
	return a.inv.CapabilityID
}

// level is the audit level of the resolved capability.
func (a *attempt) level() AuditLevel {
	if a.cap == nil {
		return AuditLevelNone
	}
	return a.cap.def.audit
}

// result builds the envelope of a settled invocation: ok when e is nil.
func (a *attempt) result(r *Registry, e *Error) Result {
	res := Result{Status: StatusOK, InvocationID: a.id(), CapabilityID: a.inv.CapabilityID}
	if e != nil {
		res.Status, res.Error = StatusError, e
	}
	v := r.version.Load()
	res.SurfaceVersion = strconv.FormatUint(v, 10)
	res.SurfaceChanged = v != a.startVersion
	if a.grant != nil && a.consumed {
		res.GrantID = a.grant.view.GrantID
	}
	return res
}

// fingerprint hashes the request as issued (semantics §5): capabilityId,
// confirmationId, the canonical input, instanceId, registrationId and
// surfaceVersion, an absent id as empty and an absent input as null. Each
// part is written with its length, so no two requests that differ write
// the same bytes. Ids are hashed byte for byte (canonical JSON would fold
// invalid UTF-8 into U+FFFD and make distinct ids collide), and input that
// is not JSON as its raw bytes behind a tag of its own.
//
// The hash is the registry's seeded maphash rather than the spec's
// fnv1a64 (DESIGN decision 17): a fingerprint is only ever compared with
// another of the same registry, and a secret seed means no caller can
// craft two requests whose fingerprints collide.
func (a *attempt) fingerprint(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	inv := &a.inv
	for _, id := range [...]string{inv.CapabilityID, inv.ConfirmationID, inv.InstanceID, inv.RegistrationID, inv.SurfaceVersion} {
		writeHead(&h, 's', len(id))
		h.WriteString(id)
	}
	switch {
	case a.inputBad != "":
		writeHead(&h, 'x', len(inv.Input))
		h.Write(inv.Input)
	case a.input == nil:
		writeHead(&h, 'j', len("null"))
		h.WriteString("null")
	default:
		writeHead(&h, 'j', len(a.input))
		h.Write(a.input)
	}
	return h.Sum64()
}

// writeHead writes the tag and the length of a part of a fingerprint.
func writeHead(h *maphash.Hash, tag byte, n int) {
	var head [9]byte
	head[0] = tag
	binary.LittleEndian.PutUint64(head[1:], uint64(n))
	h.Write(head[:])
}

// run runs phases 2 to 9 and the output check of phase 10. Each phase that
// calls user code recovers its panics itself; should one escape anyway,
// the invocation still settles, EXECUTION_FAILED handler-error.
func (r *Registry) run(ctx context.Context, a *attempt) (res Result) {
	defer func() {
		if rec := recover(); rec != nil {
			r.logPanic("the invocation", a.inv.CapabilityID, rec)
			res = a.result(r, handlerError())
		}
	}()

	// Phase 2: resolution, among the capabilities the consumer sees.
	view := r.newView(a.call.Consumer)
	t, e := r.resolve(a, &view)
	if e != nil {
		a.unresolved = true
		return a.result(r, e)
	}
	a.reg, a.cap = t.reg, t.cap
	r.observeResolved(a) // observe: kind, effect, registration and instance are known
	if a.level() != AuditLevelNone {
		r.auditCtx(ctx, AuditEvent{Type: AuditInvocationStarted, At: a.start, CapabilityID: a.capabilityID(),
			RegistrationID: a.reg.id, InvocationID: a.id(), ConsumerID: a.consumerKey})
	}
	// An approval reserved for a call that fails before it executes stands.
	defer r.releaseEvidence(a)

	// Phase 3: availability as the consumer sees it: disabled by a
	// policy, or unavailable in the current state (semantics §8.4),
	// evaluated live.
	if v := view.with(t.decision, t.st, t.cap); !v.available() {
		return a.result(r, NewError(CodeCapabilityNotAvailable, "", map[string]any{"reason": v.reason}))
	}

	// Phase 4: authorization, the authorize hooks wrapping the later
	// phases.
	a.bindCall(&view)
	return a.envelope(r, r.authorize(ctx, a))
}

// afterAuthorization runs phases 5 to 9 inside the authorize hooks.
func (r *Registry) afterAuthorization(ctx context.Context, a *attempt) Result {
	// Phase 5: effective input.
	eff, e := r.effectiveInput(ctx, a)
	if e != nil {
		return a.result(r, e)
	}
	a.eff = eff

	// Phase 6: the invoke hooks, which wrap the later phases.
	return r.invokePolicies(ctx, a)
}

// afterInvokePolicies runs the confirmation gate (the innermost layer of
// phase 6) and phases 7 to 9 inside the invoke hooks.
func (r *Registry) afterInvokePolicies(ctx context.Context, a *attempt) Result {
	evidence, e := r.confirmationGate(a)
	if e != nil {
		return a.result(r, e)
	}
	if evidence != nil {
		a.evidence = evidence
		a.call.Confirmation = &Evidence{ID: evidence.view.ConfirmationID, ApprovedAt: evidence.approvedAt}
	}
	if a.grant != nil {
		a.call.GrantID = a.grant.view.GrantID
	}

	// Phase 7: precondition.
	if e := r.precondition(ctx, a); e != nil {
		return a.result(r, e)
	}

	// Phase 8: admission.
	if e := r.admit(ctx, a); e != nil {
		return a.result(r, e)
	}
	defer r.release(a)

	// Phase 9: execution.
	out, e := r.execute(ctx, a)
	if e != nil {
		return a.result(r, e)
	}

	// Phase 10 begins: the output is encoded and checked.
	output, e := r.encodeOutput(a, out)
	res := a.result(r, e)
	res.Output = output // empty on error
	return res
}

// envelope gives a result that came back through policies (which may
// have replaced it) the envelope of this invocation.
func (a *attempt) envelope(r *Registry, res Result) Result {
	out := a.result(r, res.Error)
	if res.Error == nil {
		out.Output = res.Output
	}
	return out
}
