package surface

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// ConfirmationOutcome is how a confirmation request ended.
type ConfirmationOutcome string

// Confirmation outcomes.
const (
	OutcomeApproved ConfirmationOutcome = "approved"
	OutcomeDenied   ConfirmationOutcome = "denied"
	OutcomeExpired  ConfirmationOutcome = "expired"
)

// Resolution is a user's (or host logic's) answer to a confirmation
// request.
type Resolution struct {
	// Approved approves; false denies.
	Approved bool
	// Reason explains a denial. It stays internal: agents only learn
	// "denied"; the denial's audit record keeps it ([AuditEvent.Reason]).
	Reason string
	// Actor identifies who resolved, for the audit trail.
	Actor string
	// Channel is how the person was reached (the app's page, an approve
	// page reached by URL elicitation or a link, a form the client
	// showed, an out-of-band notifier), and Approver who answered. Both
	// are the host's to say, for traces; empty when it does not.
	Channel  Channel
	Approver ApproverKind
	// Grant, with Approved, also creates a standing grant for later
	// calls of the approved call's capability, consumer and instance,
	// in the same step as the approval (see [Confirmations.ResolveGrant]).
	Grant *GrantSpec
}

// Channel is how a person was reached for a confirmation.
type Channel string

// Channels.
const (
	// ChannelPage: the application's own page (its approvals inbox).
	ChannelPage Channel = "page"
	// ChannelURL: an approve page the client opened by URL-mode
	// elicitation.
	ChannelURL Channel = "url"
	// ChannelForm: a form the client showed (form-mode elicitation).
	ChannelForm Channel = "form"
	// ChannelLink: an approve page reached by the link in
	// CONFIRMATION_REQUIRED.
	ChannelLink Channel = "link"
	// ChannelWebhook: an out-of-band notification (a chat message).
	ChannelWebhook Channel = "webhook"
)

// ApproverKind is who answered a confirmation.
type ApproverKind string

// Approver kinds.
const (
	// ApproverUser: the person, signed in to the application.
	ApproverUser ApproverKind = "user"
	// ApproverClient: the MCP client, answering a form on the person's
	// behalf (trust it only for trusted clients).
	ApproverClient ApproverKind = "client"
	// ApproverHost: host logic (a rule, a test), no person.
	ApproverHost ApproverKind = "host"
)

// PendingConfirmation is the public view of a confirmation request, for
// host UIs: what exactly the user is asked to approve.
type PendingConfirmation struct {
	ConfirmationID string `json:"confirmationId"`
	CapabilityID   string `json:"capabilityId"`
	RegistrationID string `json:"registrationId"`
	// ConsumerKey is the normalized consumer identity, kind:id.
	ConsumerKey string `json:"consumerKey"`
	Effect      Effect `json:"effect"`
	// Summary is composed from the description and the effective input.
	Summary string `json:"summary"`
	// Input is the exact effective input being approved.
	Input       JSONText  `json:"input"`
	RequestedAt time.Time `json:"requestedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

// MarshalJSON encodes the times as ISO-8601 with milliseconds.
func (p PendingConfirmation) MarshalJSON() ([]byte, error) {
	type plain PendingConfirmation
	return json.Marshal(struct {
		plain
		RequestedAt string `json:"requestedAt"`
		ExpiresAt   string `json:"expiresAt"`
	}{plain(p), p.RequestedAt.UTC().Format(timeLayout), p.ExpiresAt.UTC().Format(timeLayout)})
}

type confirmState uint8

const (
	cPending confirmState = iota
	cApproved
	cReserved // approved evidence held by an invocation that has not executed yet
	cConsumed
	cDenied
	cExpired
)

type confirmRecord struct {
	view       PendingConfirmation
	level      AuditLevel // the capability's: full records the input
	digest     string
	state      confirmState
	approvedAt time.Time
	timer      *time.Timer
	resolved   chan struct{} // closed when it leaves pending
}

// maxResolvedConfirmations bounds the resolved records kept for late
// retries (semantics §18).
const maxResolvedConfirmations = 200

// Confirmations is the confirmation controller of a registry: pending
// requests for the host UI, their resolution, and waiting. Get it with
// [Registry.Confirmations]. It is safe for concurrent use.
type Confirmations struct {
	r        *Registry
	mu       sync.Mutex // before Registry.mu in the lock order (see Registry)
	byID     map[string]*confirmRecord
	byDigest map[string]*confirmRecord // pending records
	order    []*confirmRecord          // every kept record, creation order
	pending  int                       // len(byDigest)
	byKey    map[string]int            // pending records per consumer key
	keep     int                       // resolved records kept; 0 means maxResolvedConfirmations
	subs     []*func([]PendingConfirmation)
}

// Confirmations returns the registry's confirmation controller.
func (r *Registry) Confirmations() *Confirmations { return &r.confirm }

// Pending returns the pending requests in creation order.
func (c *Confirmations) Pending() []PendingConfirmation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pendingLocked()
}

func (c *Confirmations) pendingLocked() []PendingConfirmation {
	out := make([]PendingConfirmation, 0, c.pending)
	for _, rec := range c.order {
		if rec.state == cPending {
			out = append(out, rec.view)
		}
	}
	return out
}

// Resolve approves or denies a pending request. It reports false, and
// does nothing, for an unknown or no longer pending id, and for a
// resolution whose Grant is refused (ResolveGrant says why).
func (c *Confirmations) Resolve(id string, res Resolution) bool {
	_, err := c.ResolveGrant(id, res)
	return err == nil
}

// ResolveGrant is Resolve, reporting why it did nothing and returning the
// grant res.Grant made (the zero Grant without one). It fails
// [ErrNotPending] for an unknown or no longer pending id, and a
// *GrantError when the grant is refused.
//
// With res.Grant and res.Approved, the approval and the grant are one
// step: either the request is approved and the grant exists, or neither
// happened (the request stays pending, the refusal is audited as
// grant-refused). The grant is for the approved call's capability and
// instance; its consumer scope is the approved call's consumer unless
// res.Grant says AllConsumers; a CapabilityID, InstanceID or ConsumerKey
// it names must be those. FromInput adds the constraints that bind the
// grant to the approved input and less. A denial makes no grant
// (GrantBadScope).
func (c *Confirmations) ResolveGrant(id string, res Resolution) (Grant, error) {
	switch {
	case res.Grant == nil && res.Approved:
		return c.resolveAs(id, OutcomeApproved, &Resolution{Actor: res.Actor, Channel: res.Channel, Approver: res.Approver}, nil) // a reason explains a denial only
	case res.Grant == nil:
		return c.resolveAs(id, OutcomeDenied, &res, nil)
	}
	spec := *res.Grant
	if !res.Approved {
		return c.r.grants.refused(context.Background(), spec, res.Actor, grantErr(GrantBadScope, "a denial makes no grant"))
	}
	c.mu.Lock()
	rec := c.byID[id]
	if rec == nil || rec.state != cPending {
		c.mu.Unlock()
		return Grant{}, ErrNotPending
	}
	view := rec.view
	instance := c.r.instanceOf(view.RegistrationID, view.CapabilityID)
	c.mu.Unlock()
	g, gerr := c.r.grantFor(view, instance, spec, res.Actor)
	if gerr != nil {
		return c.r.grants.refused(context.Background(), spec, res.Actor, gerr)
	}
	plain := Resolution{Actor: res.Actor, Channel: res.Channel, Approver: res.Approver}
	made, rerr := c.resolveAs(id, OutcomeApproved, &plain, g)
	var ge *GrantError
	if errors.As(rerr, &ge) {
		return c.r.grants.refused(context.Background(), spec, res.Actor, ge)
	}
	return made, rerr
}

// instanceOf returns the instance of the live capability capID of
// registration regID, or "" when it is gone.
func (r *Registry) instanceOf(regID, capID string) string {
	id, ok := parseCapabilityID(capID)
	if !ok {
		return ""
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if c, ok := r.namedLocked(id, regID, ""); ok {
		return c.instance()
	}
	return ""
}

// grantFor prepares the grant spec asks for with the approval of the
// request view (of instance), not yet stored.
func (r *Registry) grantFor(view PendingConfirmation, instance string, spec GrantSpec, actor string) (*grantRecord, *GrantError) {
	switch {
	case instance == "":
		return nil, grantErr(GrantUnknownCapability, "the approved call's registration is gone")
	case spec.CapabilityID != "" && spec.CapabilityID != view.CapabilityID,
		spec.InstanceID != "" && spec.InstanceID != instance,
		spec.ConsumerKey != "" && spec.ConsumerKey != AllConsumers && spec.ConsumerKey != view.ConsumerKey:
		return nil, grantErr(GrantBadScope, "a grant made with an approval is for the approved call's capability, instance and consumer")
	}
	spec.CapabilityID, spec.InstanceID = view.CapabilityID, instance
	if spec.ConsumerKey == "" {
		spec.ConsumerKey = view.ConsumerKey
	}
	if spec.FromInput {
		derived, err := deriveConstraints([]byte(view.Input))
		if err != nil {
			return nil, grantErr(GrantBadConstraint, "cannot derive constraints: %v", err)
		}
		spec.Constraints = append(slices.Clone(spec.Constraints), derived...)
	}
	return r.prepareGrant(spec, actor, view.ConfirmationID)
}

// Expire expires a pending request now, as its timer would.
func (c *Confirmations) Expire(id string) bool {
	_, err := c.resolveAs(id, OutcomeExpired, nil, nil)
	return err == nil
}

// Wait blocks until the request leaves pending and returns how it ended:
// approved (also once consumed), denied or expired. An unknown id, or ctx
// ending first, gives expired.
func (c *Confirmations) Wait(ctx context.Context, id string) ConfirmationOutcome {
	c.mu.Lock()
	rec := c.byID[id]
	c.mu.Unlock()
	if rec == nil {
		return OutcomeExpired
	}
	select {
	case <-rec.resolved:
	case <-ctx.Done():
		return OutcomeExpired
	case <-c.r.closingCh:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch rec.state {
	case cApproved, cReserved, cConsumed:
		return OutcomeApproved
	case cDenied:
		return OutcomeDenied
	}
	return OutcomeExpired
}

// Subscribe calls fn with the pending list after every creation,
// resolution and expiry, until the returned function is called. fn runs
// without locks held; a panic in it is recovered.
func (c *Confirmations) Subscribe(fn func([]PendingConfirmation)) (unsubscribe func()) {
	return subscribe(&c.mu, &c.subs, fn, func() bool { return true })
}

// subscribe adds fn to a copy-on-write subscriber list guarded by mu (when
// accept says so, under mu) and returns the function that removes it.
// Lists are replaced, never changed in place, so a notifier may range over
// the list it read under mu after releasing it.
func subscribe[F any](mu *sync.Mutex, subs *[]*F, fn F, accept func() bool) (unsubscribe func()) {
	p := &fn
	mu.Lock()
	if accept() {
		*subs = append(slices.Clone(*subs), p)
	}
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if i := slices.Index(*subs, p); i >= 0 {
			*subs = slices.Delete(slices.Clone(*subs), i, i+1)
		}
	}
}

// notify tells subscribers about the pending list, each with its own copy.
func (c *Confirmations) notify(subs []*func([]PendingConfirmation), list []PendingConfirmation) {
	notifyAll(c.r.opts.Logger, "confirmation", subs, func() []PendingConfirmation { return slices.Clone(list) })
}

// notifyAll calls each subscriber with what arg returns, outside any
// lock; a panicking subscriber is recovered and logged.
func notifyAll[T any](log *slog.Logger, what string, subs []*func(T), arg func() T) {
	for _, s := range subs {
		func() {
			defer func() {
				if rec := recover(); rec != nil {
					log.Error("surface: "+what+" subscriber panicked", "panic", fmt.Sprint(rec))
				}
			}()
			(*s)(arg())
		}()
	}
}

// resolveAs moves a pending record to its outcome, as res says (nil for
// an expiry), storing the prepared grant g, if any, in the same step. It
// returns the grant stored, and fails ErrNotPending, or the store's
// refusal of g.
func (c *Confirmations) resolveAs(id string, outcome ConfirmationOutcome, res *Resolution, g *grantRecord) (Grant, error) {
	r := c.r
	c.mu.Lock()
	rec := c.byID[id]
	if rec == nil || rec.state != cPending {
		c.mu.Unlock()
		return Grant{}, ErrNotPending
	}
	var grant Grant
	var grantSubs []*func([]Grant)
	var grantList []Grant
	if g != nil {
		r.grants.mu.Lock() // under c.mu: the lock order allows it (see Registry)
		if err := r.grants.insertLocked(g); err != nil {
			r.grants.mu.Unlock()
			c.mu.Unlock()
			return Grant{}, err
		}
		grant, grantSubs, grantList = g.view.clone(), r.grants.subs, r.grants.listLocked()
		r.grants.mu.Unlock()
	}
	now := r.now()
	var typ AuditType
	switch outcome {
	case OutcomeApproved:
		rec.state, rec.approvedAt, typ = cApproved, now, AuditConfirmationApproved
	case OutcomeDenied:
		rec.state, typ = cDenied, AuditConfirmationDenied
	default:
		rec.state, typ = cExpired, AuditConfirmationExpired
		rec.view.ExpiresAt = now
	}
	c.leavePendingLocked(rec)
	subs, list := c.subs, c.pendingLocked()
	view := rec.view
	c.mu.Unlock()

	emit(r, ConfirmationResolved{ConfirmationID: id, Outcome: outcome})
	r.observeConfirmation(&view, rec.digest, outcome, now, res, grant.GrantID) // observe: the request left pending
	ev := c.auditEvent(typ, view, rec.level)
	if res != nil {
		ev.Actor, ev.Reason = res.Actor, res.Reason
	}
	r.audit(ev)
	c.notify(subs, list)
	if g != nil {
		r.grants.created(context.Background(), grant, grantSubs, grantList)
	}
	return grant, nil
}

// auditEvent is the audit record of a confirmation: which confirmation,
// of what, for whom, and at audit level full the input it binds.
func (c *Confirmations) auditEvent(typ AuditType, view PendingConfirmation, level AuditLevel) AuditEvent {
	ev := AuditEvent{Type: typ, CapabilityID: view.CapabilityID, RegistrationID: view.RegistrationID,
		ConsumerID: view.ConsumerKey, ConfirmationID: view.ConfirmationID}
	if level == AuditLevelFull {
		ev.Payload = c.r.payload(view.CapabilityID, view.Input, "")
	}
	return ev
}

// leavePendingLocked does the bookkeeping of a record leaving pending.
func (c *Confirmations) leavePendingLocked(rec *confirmRecord) {
	c.pending--
	decrement(c.byKey, rec.view.ConsumerKey)
	delete(c.byDigest, rec.digest)
	if rec.timer != nil && rec.timer.Stop() {
		c.r.ctxWG.Done() // the expiry callback will not run
	}
	rec.timer = nil
	close(rec.resolved)
	for len(c.order)-c.pending > cmp.Or(c.keep, maxResolvedConfirmations) { // drop the oldest resolved
		i := slices.IndexFunc(c.order, func(x *confirmRecord) bool { return x.state != cPending })
		delete(c.byID, c.order[i].view.ConfirmationID)
		c.order = slices.Delete(c.order, i, i+1)
	}
}

// request returns the pending record for digest, creating it if needed.
// It fails RATE_LIMITED when the store, or the consumer's share of it, is
// full.
func (c *Confirmations) request(view PendingConfirmation, level AuditLevel, digest string) (PendingConfirmation, *Error) {
	r := c.r
	c.mu.Lock()
	if rec := c.byDigest[digest]; rec != nil {
		c.mu.Unlock()
		return rec.view, nil // the same request: the same dialog
	}
	if c.pending >= r.opts.Limits.MaxPendingConfirmations || c.byKey[view.ConsumerKey] >= r.opts.Limits.MaxPendingConfirmationsPerConsumer {
		c.mu.Unlock()
		return view, NewError(CodeRateLimited, "Too many confirmations are waiting for the user; retry later.",
			map[string]any{"reason": string(ReasonQueueFull), "retryAfterMs": 1000})
	}
	r.mu.Lock() // under c.mu: the lock order allows it (see Registry)
	if r.closed {
		r.mu.Unlock()
		c.mu.Unlock()
		return view, cancelledByClose()
	}
	r.ctxWG.Add(1) // the expiry callback
	r.mu.Unlock()
	now := r.now()
	view.ConfirmationID = newConfirmationID()
	view.RequestedAt = now
	view.ExpiresAt = now.Add(r.opts.Limits.ConfirmationTTL)
	rec := &confirmRecord{view: view, level: level, digest: digest, resolved: make(chan struct{})}
	id := view.ConfirmationID
	rec.timer = time.AfterFunc(r.opts.Limits.ConfirmationTTL, func() {
		defer r.ctxWG.Done()
		c.Expire(id)
	})
	if c.byID == nil {
		c.byID = make(map[string]*confirmRecord)
		c.byDigest = make(map[string]*confirmRecord)
		c.byKey = make(map[string]int)
	}
	c.byID[id], c.byDigest[digest] = rec, rec
	c.order = append(c.order, rec)
	c.pending++
	c.byKey[view.ConsumerKey]++
	subs, list := c.subs, c.pendingLocked()
	c.mu.Unlock()

	emit(r, ConfirmationRequested{ConfirmationID: id, CapabilityID: view.CapabilityID, ExpiresAt: view.ExpiresAt.UTC().Format(timeLayout)})
	r.observeConfirmation(&view, digest, "", now, nil, "") // observe: a new request is pending
	r.audit(c.auditEvent(AuditConfirmationRequested, view, level))
	c.notify(subs, list)
	return view, nil
}

// reserve checks evidence against the request and, when it is approved
// and matches, reserves it for this invocation. It returns the pending
// view when the request is still pending and matches.
func (c *Confirmations) reserve(id, digest string) (rec *confirmRecord, pending *PendingConfirmation, e *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec = c.byID[id]
	invalid := func(reason Reason) *Error { return NewReasonError(CodeConfirmationInvalid, reason, "") }
	switch {
	case rec == nil || rec.state == cPending && rec.digest != digest:
		return nil, nil, invalid(ReasonMismatch)
	case rec.state == cPending:
		v := rec.view
		return nil, &v, nil
	case rec.state == cDenied:
		return nil, nil, invalid(ReasonDenied)
	case rec.state == cExpired:
		return nil, nil, invalid(ReasonExpired)
	case rec.state != cApproved: // consumed, or reserved by another call
		return nil, nil, invalid(ReasonConsumed)
	case !c.r.now().Before(rec.view.ExpiresAt):
		rec.state = cExpired // silently: the approval lapsed unused
		return nil, nil, invalid(ReasonExpired)
	case rec.digest != digest:
		return nil, nil, invalid(ReasonMismatch)
	}
	rec.state = cReserved
	return rec, nil, nil
}

// unreserve gives a reserved approval back (the invocation failed before
// executing), so a transient failure does not spend the user's approval.
func (c *Confirmations) unreserve(rec *confirmRecord) {
	c.mu.Lock()
	if rec.state == cReserved {
		rec.state = cApproved
	}
	c.mu.Unlock()
}

// consume spends a reserved approval as execution of invocation starts;
// ctx is the call's. The confirmation-consumed record names the
// invocation, so that what became of an approval can be found.
func (c *Confirmations) consume(ctx context.Context, rec *confirmRecord, invocation string) {
	c.mu.Lock()
	rec.state = cConsumed
	view := rec.view
	c.mu.Unlock()
	ev := c.auditEvent(AuditConfirmationConsumed, view, rec.level)
	ev.InvocationID = invocation
	c.r.auditCtx(ctx, ev)
}

// closeAll expires every pending request (Close).
func (c *Confirmations) closeAll() {
	for _, v := range c.Pending() {
		c.Expire(v.ConfirmationID)
	}
}

// confirmationDigest is the canonical JSON of what an approval binds to:
// spec 06 rule 2's fields and, when the consumer's client is named
// (InvokeOptions.Client), the client.
func confirmationDigest(surfaceID, regID, capID, consumerKey, client string, effect Effect, input []byte) string {
	b := make([]byte, 0, 160+len(client)+len(input))
	b = append(b, `{"capabilityId":`...)
	b = canonical.AppendString(b, capID)
	if client != "" {
		b = append(b, `,"client":`...)
		b = canonical.AppendString(b, client)
	}
	b = append(b, `,"consumerKey":`...)
	b = canonical.AppendString(b, consumerKey)
	b = append(b, `,"effect":`...)
	b = canonical.AppendString(b, string(effect))
	b = append(b, `,"effectiveInput":`...)
	b = append(b, input...)
	b = append(b, `,"registrationId":`...)
	b = canonical.AppendString(b, regID)
	b = append(b, `,"surfaceId":`...)
	b = canonical.AppendString(b, surfaceID)
	b = append(b, '}')
	return string(b)
}

// confirmationGate is the innermost layer of phase 6 (semantics §13.1):
// it decides whether the call needs the user's approval and, if so,
// requests it or checks the evidence sent. It returns approved, matching
// evidence reserved for this call, which the caller hands to the
// handler; it is spent when execution starts, and released if the call
// fails before.
func (r *Registry) confirmationGate(a *attempt) (*confirmRecord, *Error) {
	d := a.cap.def
	if d.kind == KindObservation {
		return nil, nil
	}
	level := d.confirmation
	var composer func(any) string // of the first active escalation that has one
	alwaysAsk := false            // an active escalation that no grant skips
	for i := range a.cap.chain {
		esc := a.cap.chain[i].escalate
		if esc == nil || !r.escalationActive(a, esc) {
			continue
		}
		level = ConfirmRequired
		alwaysAsk = alwaysAsk || esc.when == nil || esc.always
		if composer == nil {
			composer = esc.summary
		}
	}
	if level != ConfirmRequired {
		return nil, nil // a confirmationId sent anyway is ignored, not consumed
	}
	if a.inv.ConfirmationID == "" && !alwaysAsk && d.grants.Allow {
		// A standing grant may let the call skip the question (deny >
		// ask > grant: denying policies ran outside this layer).
		if g := r.grants.take(a); g != nil {
			a.grant = g
			r.observePhase(a, PhaseEvent{Phase: PhaseConfirmationGranted, GrantID: g.view.GrantID}) // observe: a grant skips the question
			return nil, nil
		}
	}
	digest := confirmationDigest(r.surfaceID, a.reg.id, a.cap.id, a.consumerKey, a.client, d.effect, a.eff.text)
	if id := a.inv.ConfirmationID; id != "" {
		rec, pending, e := r.confirm.reserve(id, digest)
		r.observePresented(a, id, rec, pending) // observe: the evidence was checked (accepted iff rec != nil)
		switch {
		case e != nil:
			return nil, e
		case pending != nil:
			return nil, confirmationRequired(*pending)
		}
		return rec, nil
	}
	view := PendingConfirmation{
		CapabilityID: a.cap.id, RegistrationID: a.reg.id, ConsumerKey: a.consumerKey,
		Effect: d.effect, Summary: r.summary(a, composer), Input: JSONText(a.eff.text),
	}
	view, e := r.confirm.request(view, d.audit, digest)
	if e != nil {
		return nil, e
	}
	r.observePhase(a, requestedPhase(view)) // observe: the user's approval is requested
	return nil, confirmationRequired(view)
}

// confirmationRequired is the CONFIRMATION_REQUIRED of a pending request.
func confirmationRequired(v PendingConfirmation) *Error {
	return NewError(CodeConfirmationRequired, "", map[string]any{
		"confirmationId": v.ConfirmationID, "summary": v.Summary,
		"expiresAt": v.ExpiresAt.UTC().Format(timeLayout), "effect": string(v.Effect), "origin": "client",
	})
}

// escalationActive evaluates a RequireConfirmation condition against the
// effective input; one that panics counts as active (fail closed).
func (r *Registry) escalationActive(a *attempt, esc *escalation) bool {
	if esc.when == nil {
		return true
	}
	return guarded(r, "a confirmation condition", a.inv.CapabilityID, true, func() bool {
		return esc.when(&InvokeContext{PolicyContext: *a.pc, InvocationID: a.id(), Input: a.eff.value})
	})
}

// summary composes what the user is asked to approve: the composer's text
// (the description if it panics), else the description and the effective
// input.
func (r *Registry) summary(a *attempt, composer func(any) string) string {
	d := a.cap.def
	if composer == nil {
		return clip(d.description+" — input: "+string(a.eff.text), maxMessage)
	}
	return clip(guarded(r, "a confirmation summary", a.inv.CapabilityID, d.description, func() string { return composer(a.eff.value) }), maxMessage)
}

// releaseEvidence gives back approved evidence, or the use of a grant,
// reserved by a call that failed before it executed, so the user's
// approval still stands.
func (r *Registry) releaseEvidence(a *attempt) {
	if a.evidence != nil && !a.consumed {
		r.confirm.unreserve(a.evidence)
	}
	if a.grant != nil && !a.consumed {
		r.grants.release(a.grant)
	}
}
