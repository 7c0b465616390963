package surface

import (
	"strconv"
	"time"
)

// Explanation is the developer's view of a surface for one consumer, from
// [Registry.Explain]: every capability in scope, hidden ones included,
// with the vote of each policy of its chain.
type Explanation struct {
	SurfaceID      string    `json:"surfaceId"`
	SurfaceVersion string    `json:"surfaceVersion"`
	CapturedAt     time.Time `json:"capturedAt"`
	// Consumer is the consumer the explanation was computed for.
	Consumer Consumer `json:"consumer"`
	// Capabilities are in snapshot order: components by priority, type
	// and instance id, each with its observations, then its actions, then
	// its procedure references.
	Capabilities []CapabilityExplanation `json:"capabilities"`
}

// Visibility is what a consumer's snapshot shows of a capability: a
// policy's disable and the state's unavailability look alike there (both
// listed with available false and a reason); [View] tells them apart.
type Visibility string

// Visibilities.
const (
	// VisibilityExposed: listed and available.
	VisibilityExposed Visibility = "exposed"
	// VisibilityUnavailable: listed with available false and a reason.
	VisibilityUnavailable Visibility = "unavailable"
	// VisibilityHidden: absent; for this consumer the capability does not
	// exist.
	VisibilityHidden Visibility = "hidden"
)

// View is the consumer view of a capability (DESIGN decision 19): what one
// consumer sees of it, as [Registry.Snapshot], [Registry.Invoke] and the
// toolset decide it. A policy that hides it wins; else a policy that
// disables it; else the capability's availability.
type View string

// Views.
const (
	// ViewAvailable: listed and available.
	ViewAvailable View = "available"
	// ViewUnavailable: listed, unavailable because of the current state
	// (a disabled component, an availability override, When), with the
	// state's reason. Calls fail CAPABILITY_NOT_AVAILABLE.
	ViewUnavailable View = "unavailable"
	// ViewDisabled: listed, unavailable because a policy disabled it for
	// this consumer, with the first disabling policy's reason. Calls fail
	// CAPABILITY_NOT_AVAILABLE.
	ViewDisabled View = "disabled"
	// ViewHidden: absent; for this consumer the capability does not
	// exist, and calls fail CAPABILITY_NOT_FOUND.
	ViewHidden View = "hidden"
)

// Outcome is what a snapshot shows of a capability in view v.
func (v View) Outcome() Visibility {
	switch v {
	case ViewAvailable:
		return VisibilityExposed
	case ViewHidden:
		return VisibilityHidden
	}
	return VisibilityUnavailable
}

// CapabilityExplanation explains one capability for one consumer.
type CapabilityExplanation struct {
	CapabilityID   string `json:"capabilityId"`
	Kind           Kind   `json:"kind"`
	Plane          Plane  `json:"plane"`
	Description    string `json:"description"`
	RegistrationID string `json:"registrationId"`
	ComponentType  string `json:"componentType"`
	InstanceID     string `json:"instanceId"`
	// Outcome is what the consumer's snapshot shows, with Reason its
	// unavailableReason: a policy's Disable reason, else the availability
	// reason. For a consumer of unknown kind, which sees nothing, every
	// capability is hidden with a Reason saying so, and no policy runs.
	Outcome Visibility `json:"outcome"`
	Reason  string     `json:"reason,omitempty"`
	// View is the consumer view the outcome shows (View.Outcome() is
	// Outcome), which tells what the snapshot shows alike apart: a
	// policy's disable (ViewDisabled) from the state's unavailability
	// (ViewUnavailable). Reason is the reason of either.
	View View `json:"view"`
	// Available and UnavailableReason are the capability's availability
	// on its own (component disabled, pushed override, When), whatever the
	// policies decided: they tell "a policy removed it" from "the current
	// state does not allow it".
	Available         bool   `json:"available"`
	UnavailableReason string `json:"unavailableReason,omitempty"`
	// Policies is the capability's chain, outermost first: the order its
	// hooks run in.
	Policies []PolicyExplanation `json:"policies"`
	// Grants is the ceiling of the standing grants that may let its
	// calls skip the confirmation question, or nil when none may: its
	// definition allows none, a RequireConfirmation policy always asks,
	// or it never asks. It depends on the declarations only, not on the
	// consumer, and is reported also for a hidden capability.
	Grants *GrantCeiling `json:"grants,omitempty"`
}

// PolicyLayer is where a policy of a chain was attached.
type PolicyLayer string

// Policy layers, outermost first.
const (
	// LayerRegistry: Options.Policies.
	LayerRegistry PolicyLayer = "registry"
	// LayerComponent: Component.Policies.
	LayerComponent PolicyLayer = "component"
	// LayerGuard: the Policies of the registration guard's Verdict.
	LayerGuard PolicyLayer = "guard"
	// LayerCapability: the Policies of the capability's definition.
	LayerCapability PolicyLayer = "capability"
)

// PolicyExplanation is one policy of a capability's chain and its vote.
type PolicyExplanation struct {
	Name  string      `json:"name"`
	Layer PolicyLayer `json:"layer"`
	// Hooks are the hooks the policy sets, in pipeline order: "discover",
	// "authorize", "invoke".
	Hooks []string `json:"hooks"`
	// Vote is the Discover hook's decision for this consumer, "expose",
	// "disable" or "hide"; empty without a Discover hook. Reason is a
	// disable's reason.
	Vote   string `json:"vote,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Panicked is set when Discover panicked: the vote is then "hide", as
	// for the snapshot, but the policy has a defect.
	Panicked bool `json:"panicked,omitempty"`
	// RequiresConfirmation marks a [RequireConfirmation] policy.
	RequiresConfirmation bool `json:"requiresConfirmation,omitempty"`
}

// unknownKindReason is the Reason of every capability explained for a
// consumer of unknown kind.
const unknownKindReason = "the consumer's kind is unknown: it sees nothing"

// Explain answers the developer's question a snapshot cannot: why is this
// capability missing, or disabled, for this consumer? It lists every
// capability in opts.Scope that the snapshot for opts.Consumer would
// consider, hidden ones included, with its view (the consumer view that
// snapshot, Invoke and the toolset decide by, its outcome equal to that
// snapshot's), its availability on its own, and each policy's layer and
// vote.
//
// An explanation is for developers, tests and operator tools, never for
// an agent: that a hidden capability exists is information its consumer is
// not owed. No toolset, meta tool or adapter of this module calls Explain,
// and nothing an agent can call returns one.
//
// Explain ignores OmitUnavailable and Budget: it withholds nothing. Like
// Snapshot it calls Discover hooks and When predicates, never handlers,
// and never while holding the registry lock; unlike Snapshot it runs every
// Discover hook of a chain, also after one has hidden the capability.
func (r *Registry) Explain(opts SnapshotOptions) Explanation {
	consumer := opts.Consumer.normalized()
	r.mu.Lock() // orderedLocked may rebuild the order
	version := r.version.Load()
	live := r.orderedLocked() // never changed once made: read on after unlocking
	states := make([]*regState, len(live))
	for i, reg := range live {
		states[i] = reg.st
	}
	r.mu.Unlock()

	ex := Explanation{
		SurfaceID:      r.surfaceID,
		SurfaceVersion: strconv.FormatUint(version, 10),
		CapturedAt:     r.now(),
		Consumer:       consumer,
		Capabilities:   []CapabilityExplanation{},
	}
	known := consumer.Kind.Valid()
	view := r.newView(consumer)
	for k, reg := range live {
		for i := range reg.caps {
			rc := &reg.caps[i]
			if !capInScope(reg, i, opts.Scope) {
				continue
			}
			ce := CapabilityExplanation{
				CapabilityID: rc.id, Kind: rc.def.kind, Plane: planeOf(rc.id), Description: rc.def.description,
				RegistrationID: reg.id, ComponentType: reg.typ, InstanceID: reg.instance,
			}
			ce.Available, ce.UnavailableReason = r.availability(states[k], rc)
			if c, ok := r.grantCeiling(rc); ok {
				ce.Grants = &c
			}
			if !known {
				ce.View, ce.Outcome, ce.Reason = ViewHidden, VisibilityHidden, unknownKindReason
				ex.Capabilities = append(ex.Capabilities, ce)
				continue
			}
			ce.Policies = r.policyLayers(reg, rc)
			pc := view.policyContext()
			pc.fill(reg, rc)
			decision := r.decide(rc.chain, pc, ce.Policies) // every hook, each vote recorded
			v := viewOf(decision, func() (bool, string) { return ce.Available, ce.UnavailableReason })
			ce.View, ce.Reason = v.public(), v.reason
			ce.Outcome = ce.View.Outcome()
			ex.Capabilities = append(ex.Capabilities, ce)
		}
	}
	return ex
}

// policyLayers describes rc's chain, outermost first: each policy's name,
// layer and hooks (the votes are the consumer view's to fill).
func (r *Registry) policyLayers(reg *registration, rc *regCap) []PolicyExplanation {
	pols := make([]PolicyExplanation, len(rc.chain))
	nReg := len(r.opts.Policies)
	for k := range rc.chain {
		p := &rc.chain[k]
		pe := PolicyExplanation{Name: p.Name, RequiresConfirmation: p.escalate != nil, Hooks: []string{}}
		switch {
		case k < nReg:
			pe.Layer = LayerRegistry
		case k < nReg+reg.nComponentPolicies:
			pe.Layer = LayerComponent
		case k < nReg+reg.nComponentPolicies+reg.nGuardPolicies:
			pe.Layer = LayerGuard
		default:
			pe.Layer = LayerCapability
		}
		if p.Discover != nil {
			pe.Hooks = append(pe.Hooks, "discover")
		}
		if p.Authorize != nil {
			pe.Hooks = append(pe.Hooks, "authorize")
		}
		if p.Invoke != nil || p.escalate != nil {
			pe.Hooks = append(pe.Hooks, "invoke")
		}
		pols[k] = pe
	}
	return pols
}
