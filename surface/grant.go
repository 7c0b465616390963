package surface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/internal/randid"
)

// Standing grants (issue "standing grants", DESIGN decision 25).
//
// A grant lets later calls of one capability, by one consumer (or every
// consumer of the registry: the agents of the registry's one user), skip
// the question a confirmation would ask, for a while, a number of times,
// for inputs within its constraints — and nothing else: every other phase
// of the pipeline runs as before, and a call outside the grant asks as
// before. The host creates grants from a person's decision (an approve
// page's "allow this for 10 minutes", a console's approval card); no
// agent can: no tool, meta verb, MCP method or field of an invocation
// creates, widens or presents one. The registry finds the grant itself,
// at the innermost layer of phase 6.
//
// Precedence is deny > ask > grant. A policy that denies (its Authorize
// or Invoke hook fails the call) runs before the question and wins. A
// RequireConfirmation policy without a condition, or with [AlwaysAsk],
// asks whatever grants exist. Grants are opt-in per capability: a
// definition allows them with its Grants field ([GrantRule]); a
// destructive or external-side-effect procedure must name its ceiling
// (the longest TTL and the most uses a grant may have).
//
// The store is per registry, bounded (Limits.MaxGrants live grants), and
// dies with the registry: nothing of a grant outlives the session it was
// made in.

// AllConsumers is the consumer scope of a grant for every consumer of the
// registry. A registry is one user's session, so this is "all the agents
// of the user". No consumer key is "*": keys are kind:id.
const AllConsumers = "*"

// GrantRule is a capability's opt-in to standing grants, set in its
// definition (ActionDef.Grants, ProcedureDef.Grants). The zero GrantRule
// allows none: every call that needs confirmation asks.
type GrantRule struct {
	// Allow lets grants skip the capability's question.
	Allow bool
	// MaxTTL caps how long a grant may last; zero means
	// Limits.MaxGrantTTL, which also caps it.
	MaxTTL time.Duration
	// MaxUses caps how many calls a grant may allow; zero means no cap
	// beyond the TTL.
	//
	// A destructive or external-side-effect procedure reference that
	// allows grants must set both MaxTTL and MaxUses (Register fails with
	// INVALID_DEFINITION otherwise): the application names the ceiling of
	// what a person may let through unasked.
	MaxUses int
}

// check reports a defect of the rule of a capability with effect e.
func (g GrantRule) check(e Effect) *DefinitionError {
	switch {
	case g.MaxTTL < 0 || g.MaxUses < 0:
		return defErr(DefinitionInvalid, "grants", "a grant ceiling must not be negative")
	case !g.Allow && (g.MaxTTL != 0 || g.MaxUses != 0):
		return defErr(DefinitionInvalid, "grants", "a grant ceiling without Allow: set Allow to allow grants")
	case g.Allow && highEffect(e) && (g.MaxTTL == 0 || g.MaxUses == 0):
		return defErr(DefinitionInvalid, "grants", "a "+string(e)+" capability that allows grants must set MaxTTL and MaxUses")
	}
	return nil
}

// highEffect reports whether e is at the top of the effect ladder, where
// grants need an explicit ceiling.
func highEffect(e Effect) bool { return e == EffectDestructive || e == EffectExternalSideEffect }

// GrantCeiling is the most a grant of a capability may allow: its TTL at
// most MaxTTL, its uses at most MaxUses (0: no cap on uses). Its JSON is
// {"maxTtlMs": …, "maxUses": …}, maxUses left out when there is no cap.
type GrantCeiling struct {
	MaxTTL  time.Duration
	MaxUses int
}

// MarshalJSON encodes the ceiling with the TTL in milliseconds.
func (c GrantCeiling) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		MaxTTLMs int64 `json:"maxTtlMs"`
		MaxUses  int   `json:"maxUses,omitempty"`
	}{c.MaxTTL.Milliseconds(), c.MaxUses})
}

// grantCeiling returns the ceiling of grants on rc, and false when no
// grant may skip its question: an observation (which never asks), a
// definition that does not allow grants, a chain with a
// RequireConfirmation policy without a condition (it asks every call,
// and no grant skips it), or a capability whose only questions are
// ones no grant skips (its level is not required, and every policy that
// can raise it is AlwaysAsk).
func (r *Registry) grantCeiling(rc *regCap) (GrantCeiling, bool) {
	d := rc.def
	if d.kind == KindObservation || !d.grants.Allow {
		return GrantCeiling{}, false
	}
	asks := d.confirmation == ConfirmRequired
	for i := range rc.chain {
		switch esc := rc.chain[i].escalate; {
		case esc == nil:
		case esc.when == nil: // asks every call, and no grant skips it
			return GrantCeiling{}, false
		case !esc.always: // asks some calls, which a grant may let through
			asks = true
		}
	}
	if !asks {
		return GrantCeiling{}, false
	}
	ttl := r.opts.Limits.MaxGrantTTL
	if d.grants.MaxTTL > 0 && d.grants.MaxTTL < ttl {
		ttl = d.grants.MaxTTL
	}
	return GrantCeiling{MaxTTL: ttl, MaxUses: d.grants.MaxUses}, true
}

// within reports whether a grant lasting ttl with maxUses (0: uncapped)
// stays within the ceiling.
func (c GrantCeiling) within(ttl time.Duration, maxUses int) bool {
	return ttl <= c.MaxTTL && (c.MaxUses == 0 || maxUses > 0 && maxUses <= c.MaxUses)
}

// GrantSpec is what the host asks [Grants.Create] for.
type GrantSpec struct {
	// ConsumerKey is the consumer the grant is for ([Consumer.Key], e.g.
	// "mcp-bridge:claude"), or [AllConsumers].
	ConsumerKey string
	// CapabilityID is the capability whose question the grant skips.
	CapabilityID string
	// InstanceID, if set, limits the grant to the capability of that
	// instance (a view component's instance, a procedure reference's
	// context instance).
	InstanceID string
	// Constraints bound the effective inputs the grant lets through; a
	// call must satisfy every one. None: any valid input.
	Constraints []Constraint
	// TTL is how long the grant lasts. Required, at most the
	// capability's ceiling.
	TTL time.Duration
	// MaxUses is how many calls it may allow; zero means no cap, which a
	// capability whose ceiling caps uses refuses.
	MaxUses int
	// FromInput, for a grant made with [Confirmations.ResolveGrant],
	// adds the constraints that bind it to the approved input and less
	// (see [OnlyKeys]): every member of the input must be set, with
	// values among the approved ones (for a list, each element), and no
	// other member. [Grants.Create] refuses it: there is no approved
	// input there.
	FromInput bool
}

// GrantState is the state of a grant.
type GrantState string

// Grant states. Only an active grant lets calls through.
const (
	GrantActive  GrantState = "active"
	GrantUsedUp  GrantState = "used-up"
	GrantExpired GrantState = "expired"
	GrantRevoked GrantState = "revoked"
)

// Grant is a standing grant as the host sees it (the console's Grants
// card, an audit view). Its JSON uses camelCase names and ISO-8601
// times; endedAt is left out while it is active.
//
// The brief's revokedAt is generalised into State and EndedAt: a grant
// also ends when it expires or its last use is spent, and a host lists
// all three alike.
type Grant struct {
	// GrantID is "gnt_" + 12 base62 characters.
	GrantID      string `json:"grantId"`
	ConsumerKey  string `json:"consumerKey"`
	CapabilityID string `json:"capabilityId"`
	InstanceID   string `json:"instanceId,omitempty"`
	// Constraints are the grant's constraints, in creation order.
	Constraints []Constraint `json:"constraints,omitempty"`
	// MaxUses is 0 for no cap; Uses is how many calls it allowed.
	MaxUses int `json:"maxUses,omitempty"`
	Uses    int `json:"uses"`
	// CreatedBy is the actor the host named.
	CreatedBy string `json:"createdBy,omitempty"`
	// ConfirmationID is the approval the grant was made with
	// ([Confirmations.ResolveGrant]), if any.
	ConfirmationID string     `json:"confirmationId,omitempty"`
	State          GrantState `json:"state"`
	// CreatedAt, ExpiresAt and EndedAt are on the registry's clock.
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	EndedAt   time.Time `json:"endedAt"`
}

// MarshalJSON encodes the times as ISO-8601 with milliseconds.
func (g Grant) MarshalJSON() ([]byte, error) {
	type plain Grant
	ended := ""
	if !g.EndedAt.IsZero() {
		ended = g.EndedAt.UTC().Format(timeLayout)
	}
	return json.Marshal(struct {
		plain
		CreatedAt string `json:"createdAt"`
		ExpiresAt string `json:"expiresAt"`
		EndedAt   string `json:"endedAt,omitempty"`
	}{plain(g), g.CreatedAt.UTC().Format(timeLayout), g.ExpiresAt.UTC().Format(timeLayout), ended})
}

// clone returns a Grant sharing nothing mutable with g.
func (g Grant) clone() Grant {
	if g.Constraints != nil {
		cs := make([]Constraint, len(g.Constraints))
		for i, c := range g.Constraints {
			cs[i] = c.clone()
		}
		g.Constraints = cs
	}
	return g
}

// GrantErrorCode classifies why a grant was refused.
type GrantErrorCode string

// Grant error codes.
const (
	// GrantUnknownCapability: no live capability has the id (of the
	// instance, when one is named).
	GrantUnknownCapability GrantErrorCode = "UNKNOWN_CAPABILITY"
	// GrantNotAllowed: the capability does not allow grants (see
	// [GrantRule]), a policy always asks, or it never asks.
	GrantNotAllowed GrantErrorCode = "NOT_GRANTABLE"
	// GrantCeilingExceeded: the TTL or the uses exceed the capability's
	// ceiling, or the TTL is not positive.
	GrantCeilingExceeded GrantErrorCode = "CEILING_EXCEEDED"
	// GrantBadConstraint: a constraint names a path the input schema does
	// not declare, or is malformed.
	GrantBadConstraint GrantErrorCode = "BAD_CONSTRAINT"
	// GrantBadScope: the consumer key is neither a valid consumer's key
	// nor AllConsumers, or a grant made with a resolution names another
	// capability, instance or consumer than the approved call's.
	GrantBadScope GrantErrorCode = "BAD_SCOPE"
	// GrantStoreFull: Limits.MaxGrants grants are active.
	GrantStoreFull GrantErrorCode = "STORE_FULL"
	// GrantClosed: the registry is closed.
	GrantClosed GrantErrorCode = "CLOSED"
)

// GrantError is why [Grants.Create] or [Confirmations.ResolveGrant]
// refused a grant. errors.Is(err, &GrantError{Code: c}) matches any
// GrantError with code c.
type GrantError struct {
	Code GrantErrorCode
	// Message says what is wrong, for the host's developer or its UI.
	Message string
}

// Error implements error.
func (e *GrantError) Error() string {
	return "surface: grant refused: " + string(e.Code) + ": " + e.Message
}

// Is matches another *GrantError with the same Code.
func (e *GrantError) Is(target error) bool {
	t, ok := target.(*GrantError)
	return ok && t.Code == e.Code
}

func grantErr(code GrantErrorCode, format string, args ...any) *GrantError {
	return &GrantError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// grantRecord is one grant of the store.
type grantRecord struct {
	view     Grant   // State, Uses and EndedAt change, under Grants.mu
	checks   []check // the compiled constraints
	ttl      time.Duration
	reserved int // uses held by calls past their question that have not executed yet
	timer    *time.Timer
}

// available reports whether the grant can allow one more call at now.
func (g *grantRecord) available(now time.Time) bool {
	return g.view.State == GrantActive && now.Before(g.view.ExpiresAt) &&
		(g.view.MaxUses == 0 || g.view.Uses+g.reserved < g.view.MaxUses)
}

// maxEndedGrants bounds the ended grants kept for Get.
const maxEndedGrants = 200

// Grants is the standing-grant controller of a registry, for the host:
// create, revoke, list and watch grants. Get it with [Registry.Grants].
// Nothing an agent can call reaches it. It is safe for concurrent use.
type Grants struct {
	r      *Registry
	mu     sync.Mutex // after Confirmations.mu, before Registry.mu (see Registry)
	active int        // grants in state active
	byID   map[string]*grantRecord
	byCap  map[string][]*grantRecord // active grants by capability id, creation order
	order  []*grantRecord            // every kept grant, creation order
	subs   []*func([]Grant)
}

// Grants returns the registry's grant controller.
func (r *Registry) Grants() *Grants { return &r.grants }

// List returns the active grants in creation order.
func (g *Grants) List() []Grant {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.listLocked()
}

func (g *Grants) listLocked() []Grant {
	out := make([]Grant, 0, g.active)
	for _, rec := range g.order {
		if rec.view.State == GrantActive {
			out = append(out, rec.view.clone())
		}
	}
	return out
}

// Get returns the grant with id, active or ended (the latest ended ones
// are kept), and false when it is unknown.
func (g *Grants) Get(id string) (Grant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rec := g.byID[id]; rec != nil {
		return rec.view.clone(), true
	}
	return Grant{}, false
}

// Subscribe calls fn with the active grants after every creation, use,
// revocation and expiry, until the returned function is called. fn runs
// without locks held; a panic in it is recovered.
func (g *Grants) Subscribe(fn func([]Grant)) (unsubscribe func()) {
	return subscribe(&g.mu, &g.subs, fn, func() bool { return true })
}

// notify tells subscribers about the active grants.
func (g *Grants) notify(subs []*func([]Grant), list []Grant) {
	notifyAll(g.r.opts.Logger, "grant", subs, func() []Grant {
		out := make([]Grant, len(list))
		for i, x := range list {
			out[i] = x.clone()
		}
		return out
	})
}

// Ceiling returns the ceiling of grants on the live capability with id
// (of the instance, when instanceID is set): what a host UI may offer.
// With several live candidates it is the least of theirs. It fails
// GrantUnknownCapability or GrantNotAllowed.
func (g *Grants) Ceiling(capabilityID, instanceID string) (GrantCeiling, error) {
	c, _, err := g.r.grantTarget(capabilityID, instanceID, nil)
	if err != nil {
		return GrantCeiling{}, err
	}
	return c, nil
}

// Create makes a grant for spec on behalf of actor (who decided: the
// signed-in user's name, for the audit trail) and returns it. It refuses
// with a *GrantError, and audits the refusal as grant-refused: an unknown
// capability, one that allows no grant, a TTL or uses beyond its
// ceiling, a constraint on a path its input schema does not declare, a
// bad consumer scope, a full store. ctx carries the host's request (its
// trace span gets the grant-created event); it is never cancelled into
// the audit.
func (g *Grants) Create(ctx context.Context, spec GrantSpec, actor string) (Grant, error) {
	if spec.FromInput {
		return g.refused(ctx, spec, actor, grantErr(GrantBadConstraint, "FromInput needs an approved input: use Confirmations.ResolveGrant"))
	}
	rec, err := g.r.prepareGrant(spec, actor, "")
	if err != nil {
		return g.refused(ctx, spec, actor, err)
	}
	g.mu.Lock()
	if err := g.insertLocked(rec); err != nil {
		g.mu.Unlock()
		return g.refused(ctx, spec, actor, err)
	}
	view, subs, list := rec.view.clone(), g.subs, g.listLocked()
	g.mu.Unlock()
	g.created(ctx, view, subs, list)
	return view, nil
}

// refused audits a refused creation and returns err.
func (g *Grants) refused(ctx context.Context, spec GrantSpec, actor string, err *GrantError) (Grant, error) {
	g.r.auditCtx(ctx, AuditEvent{Type: AuditGrantRefused, CapabilityID: spec.CapabilityID, ConsumerID: spec.ConsumerKey,
		Actor: actor, Reason: string(err.Code)})
	return Grant{}, err
}

// created reports a new grant: audit, telemetry, subscribers.
func (g *Grants) created(ctx context.Context, v Grant, subs []*func([]Grant), list []Grant) {
	r := g.r
	r.auditCtx(ctx, AuditEvent{Type: AuditGrantCreated, CapabilityID: v.CapabilityID, ConsumerID: v.ConsumerKey,
		GrantID: v.GrantID, ConfirmationID: v.ConfirmationID, Actor: v.CreatedBy})
	r.observeGrant(ctx, &v, GrantChangeCreated, "") // observe: a grant was made
	g.notify(subs, list)
}

// Revoke ends the active grant with id on behalf of actor: no later call
// uses it. A call already past its question (waiting for admission)
// goes on, as one whose approval was presented before. It reports false,
// and does nothing, for an unknown or ended grant.
func (g *Grants) Revoke(ctx context.Context, id, actor string) bool {
	return g.end(ctx, id, GrantRevoked, actor)
}

// end moves an active grant to state (revoked or expired).
func (g *Grants) end(ctx context.Context, id string, state GrantState, actor string) bool {
	r := g.r
	g.mu.Lock()
	rec := g.byID[id]
	if rec == nil || rec.view.State != GrantActive {
		g.mu.Unlock()
		return false
	}
	g.endLocked(rec, state, r.now())
	view, subs, list := rec.view.clone(), g.subs, g.listLocked()
	g.mu.Unlock()

	typ, change := AuditGrantRevoked, GrantChangeRevoked
	if state == GrantExpired {
		typ, change = AuditGrantExpired, GrantChangeExpired
	}
	r.auditCtx(ctx, AuditEvent{Type: typ, CapabilityID: view.CapabilityID, ConsumerID: view.ConsumerKey, GrantID: id, Actor: actor})
	r.observeGrant(ctx, &view, change, "") // observe: the grant ended
	g.notify(subs, list)
	return true
}

// endLocked does the bookkeeping of a grant leaving active.
func (g *Grants) endLocked(rec *grantRecord, state GrantState, now time.Time) {
	rec.view.State, rec.view.EndedAt = state, now
	g.active--
	list := g.byCap[rec.view.CapabilityID]
	if i := slices.Index(list, rec); i >= 0 {
		list = slices.Delete(slices.Clone(list), i, i+1)
	}
	if len(list) == 0 {
		delete(g.byCap, rec.view.CapabilityID)
	} else {
		g.byCap[rec.view.CapabilityID] = list
	}
	if rec.timer != nil && rec.timer.Stop() {
		g.r.ctxWG.Done() // the expiry callback will not run
	}
	rec.timer = nil
	for len(g.order)-g.active > maxEndedGrants { // drop the oldest ended
		i := slices.IndexFunc(g.order, func(x *grantRecord) bool { return x.view.State != GrantActive })
		delete(g.byID, g.order[i].view.GrantID)
		g.order = slices.Delete(g.order, i, i+1)
	}
}

// insertLocked adds a prepared grant to the store and arms its expiry.
func (g *Grants) insertLocked(rec *grantRecord) *GrantError {
	r := g.r
	if g.active >= r.opts.Limits.MaxGrants {
		return grantErr(GrantStoreFull, "%d grants are active, the limit", r.opts.Limits.MaxGrants)
	}
	r.mu.Lock() // under g.mu: the lock order allows it (see Registry)
	if r.closed {
		r.mu.Unlock()
		return grantErr(GrantClosed, "the registry is closed")
	}
	r.ctxWG.Add(1) // the expiry callback
	r.mu.Unlock()
	now := r.now()
	rec.view.GrantID = randid.Base62("gnt_", 12)
	rec.view.State = GrantActive
	rec.view.CreatedAt, rec.view.ExpiresAt = now, now.Add(rec.ttl)
	id := rec.view.GrantID
	rec.timer = time.AfterFunc(rec.ttl, func() {
		defer r.ctxWG.Done()
		g.end(context.Background(), id, GrantExpired, "")
	})
	if g.byID == nil {
		g.byID = make(map[string]*grantRecord)
		g.byCap = make(map[string][]*grantRecord)
	}
	g.byID[id] = rec
	g.byCap[rec.view.CapabilityID] = append(slices.Clone(g.byCap[rec.view.CapabilityID]), rec)
	g.order = append(g.order, rec)
	g.active++
	return nil
}

// grantTarget finds the live capabilities a grant on capabilityID (of
// instanceID, when set) may apply to and returns the least of their
// ceilings; when constraints is not nil it also compiles them against
// each candidate's input schema. It never calls user code.
func (r *Registry) grantTarget(capabilityID, instanceID string, constraints []Constraint) (GrantCeiling, []check, *GrantError) {
	id, ok := parseCapabilityID(capabilityID)
	if !ok {
		return GrantCeiling{}, nil, grantErr(GrantUnknownCapability, "%q is not a capability id", capabilityID)
	}
	r.mu.RLock()
	cands := r.candidatesLocked(nil, id, instanceID)
	r.mu.RUnlock()
	if len(cands) == 0 {
		return GrantCeiling{}, nil, grantErr(GrantUnknownCapability, "no live capability %q%s", capabilityID, ofInstance(instanceID))
	}
	var ceiling GrantCeiling
	var checks []check
	for i, c := range cands {
		cc, ok := r.grantCeiling(c.cap)
		if !ok {
			return GrantCeiling{}, nil, grantErr(GrantNotAllowed, "%s%s allows no standing grant", capabilityID, ofInstance(c.instance()))
		}
		if i == 0 {
			ceiling = cc
		} else {
			ceiling.MaxTTL = min(ceiling.MaxTTL, cc.MaxTTL)
			if ceiling.MaxUses == 0 || cc.MaxUses != 0 && cc.MaxUses < ceiling.MaxUses {
				ceiling.MaxUses = cc.MaxUses
			}
		}
		for k := range constraints {
			ck, why := constraints[k].compile(c.cap.def.input)
			if why != "" {
				return GrantCeiling{}, nil, grantErr(GrantBadConstraint, "constraint %d: %s", k, why)
			}
			if i == 0 {
				checks = append(checks, ck)
			}
		}
	}
	return ceiling, checks, nil
}

func ofInstance(instance string) string {
	if instance == "" {
		return ""
	}
	return " of instance " + strconv.Quote(instance)
}

// prepareGrant checks spec and builds its record, not yet stored.
func (r *Registry) prepareGrant(spec GrantSpec, actor, confirmationID string) (*grantRecord, *GrantError) {
	if spec.ConsumerKey != AllConsumers && !validConsumerKey(spec.ConsumerKey) {
		return nil, grantErr(GrantBadScope, "%q is neither a consumer key (kind:id) nor AllConsumers", spec.ConsumerKey)
	}
	constraints := make([]Constraint, len(spec.Constraints))
	for i, c := range spec.Constraints {
		constraints[i] = c.clone()
	}
	ceiling, checks, err := r.grantTarget(spec.CapabilityID, spec.InstanceID, constraints)
	if err != nil {
		return nil, err
	}
	switch {
	case spec.TTL <= 0:
		return nil, grantErr(GrantCeilingExceeded, "a grant needs a positive TTL")
	case spec.MaxUses < 0:
		return nil, grantErr(GrantCeilingExceeded, "max uses must not be negative")
	case !ceiling.within(spec.TTL, spec.MaxUses):
		return nil, grantErr(GrantCeilingExceeded, "TTL %s and max uses %d exceed the ceiling of %s (TTL %s, max uses %d; 0 is no cap)",
			spec.TTL, spec.MaxUses, spec.CapabilityID, ceiling.MaxTTL, ceiling.MaxUses)
	}
	if len(constraints) == 0 {
		constraints = nil
	}
	return &grantRecord{
		view: Grant{ConsumerKey: spec.ConsumerKey, CapabilityID: spec.CapabilityID, InstanceID: spec.InstanceID,
			Constraints: constraints, MaxUses: spec.MaxUses, CreatedBy: actor, ConfirmationID: confirmationID},
		checks: checks, ttl: spec.TTL,
	}, nil
}

// validConsumerKey reports whether k is the key of a consumer of a known
// kind (kind:id with a non-empty id).
func validConsumerKey(k string) bool {
	for _, kind := range [...]ConsumerKind{ConsumerEmbedded, ConsumerWebMCP, ConsumerMCPBridge, ConsumerTest, ConsumerOther} {
		if len(k) > len(kind)+1 && k[:len(kind)] == string(kind) && k[len(kind)] == ':' {
			return true
		}
	}
	return false
}

// take finds an active grant that lets the call skip its question — of
// its consumer (or all consumers), capability and instance, whose
// constraints the effective input satisfies, within the ceiling of the
// capability as resolved now — and reserves one of its uses for the
// call. The oldest such grant is taken. It returns nil when none does.
func (g *Grants) take(a *attempt) *grantRecord {
	g.mu.Lock()
	none := g.active == 0
	g.mu.Unlock()
	if none {
		return nil
	}
	ceiling, ok := g.r.grantCeiling(a.cap)
	if !ok {
		return nil
	}
	instance := capRef{a.reg, a.cap}.instance()
	now := g.r.now()
	var buf []byte
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rec := range g.byCap[a.cap.id] {
		v := &rec.view
		if v.ConsumerKey != a.consumerKey && v.ConsumerKey != AllConsumers ||
			v.InstanceID != "" && v.InstanceID != instance ||
			!rec.available(now) || !ceiling.within(rec.ttl, v.MaxUses) ||
			!satisfiesAll(rec.checks, a.eff.value, &buf) {
			continue
		}
		rec.reserved++
		return rec
	}
	return nil
}

// satisfiesAll reports whether v satisfies every check.
func satisfiesAll(checks []check, v any, buf *[]byte) bool {
	for i := range checks {
		if !checks[i].satisfied(v, buf) {
			return false
		}
	}
	return true
}

// release gives back a use reserved by a call that failed before it
// executed.
func (g *Grants) release(rec *grantRecord) {
	g.mu.Lock()
	rec.reserved--
	g.mu.Unlock()
}

// spend spends the use the call reserved, as its execution starts, and
// records it: audit grant-used, telemetry, subscribers. The last use
// ends the grant (used-up).
func (g *Grants) spend(ctx context.Context, a *attempt) {
	r, rec := g.r, a.grant
	g.mu.Lock()
	rec.reserved--
	rec.view.Uses++
	if rec.view.MaxUses > 0 && rec.view.Uses >= rec.view.MaxUses && rec.view.State == GrantActive {
		g.endLocked(rec, GrantUsedUp, r.now())
	}
	view, subs := rec.view.clone(), g.subs
	var list []Grant
	if len(subs) > 0 {
		list = g.listLocked()
	}
	g.mu.Unlock()
	r.auditCtx(ctx, AuditEvent{Type: AuditGrantUsed, CapabilityID: a.capabilityID(), RegistrationID: a.reg.id,
		InvocationID: a.id(), ConsumerID: a.consumerKey, GrantID: view.GrantID})
	r.observeGrant(ctx, &view, GrantChangeUsed, a.id()) // observe: the grant let this call through
	if len(subs) > 0 {
		g.notify(subs, list)
	}
}

// closeAll expires every active grant (Close).
func (g *Grants) closeAll() {
	for _, v := range g.List() {
		g.end(context.Background(), v.GrantID, GrantExpired, "")
	}
}

// ErrNotPending is returned by [Confirmations.ResolveGrant] for a
// confirmation id that is unknown or no longer pending.
var ErrNotPending = errors.New("surface: the confirmation is unknown or no longer pending")
