package surface

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SnapshotOptions select what a snapshot contains. The zero value is the
// anonymous embedded consumer, every component, unavailable capabilities
// included, no budget.
type SnapshotOptions struct {
	// Consumer is who will read the snapshot; policies filter per consumer.
	Consumer Consumer
	// Scope keeps only components whose type equals a prefix or starts
	// with prefix + ".". Empty means all.
	Scope []string
	// OmitUnavailable drops capabilities that are currently unavailable
	// (by default they are listed with available false and a reason).
	OmitUnavailable bool
	// Budget, if set, caps the snapshot; dropped components are reported
	// in Snapshot.Truncated, never silently.
	Budget *Budget
}

// Budget caps a snapshot. Zero fields are unlimited.
type Budget struct {
	// MaxComponents caps the number of components.
	MaxComponents int
	// MaxBytes caps the size of the JSON encoding of the components array.
	MaxBytes int
}

// Snapshot is the catalog of the live surface at one version: what a
// consumer may observe and do. It is a copy: changing it changes nothing in
// the registry. Its JSON encoding uses the spec's field names.
type Snapshot struct {
	SurfaceID      string
	SurfaceVersion string
	CapturedAt     time.Time
	Route          *Route
	// Components are ordered by priority (desc), type, instance id. The
	// slice is the caller's; the descriptors are immutable.
	Components []ComponentDescriptor
	// Procedures are the domain procedure references (top level, not
	// nested in components).
	Procedures []ProcedureDescriptor
	// Truncated is set iff a budget dropped components.
	Truncated *Truncated
	// Closed is set when the registry was closed: the snapshot is then
	// empty because nothing can be invoked any more, unlike the empty
	// snapshot of a live registry with no component mounted, whose Closed
	// is false. It is not part of the wire form.
	Closed bool

	// static is set when no listed capability has live state (a When
	// predicate, a discovery policy, a Describe note): its states change
	// only with the surface version.
	static bool
}

// Truncated reports what a budget dropped.
type Truncated struct {
	DroppedComponents int `json:"droppedComponents"`
}

// ComponentDescriptor describes one live component in a snapshot: the
// spec's component descriptor, field for field. A snapshot's descriptors
// and their slices are the caller's own copies: changing them changes
// nothing in the registry.
type ComponentDescriptor struct {
	Type       string `json:"type"`
	InstanceID string `json:"instanceId"`
	// RegistrationID is the staleness token to send with invocations.
	RegistrationID string `json:"registrationId"`
	Description    string `json:"description"`
	// Parent is the containment link, if the component declared one.
	Parent *Parent `json:"parent,omitempty"`
	// Meta is the agent-visible metadata record, or "" if none.
	Meta JSONText `json:"meta,omitempty"`
	// Observations and Actions are the listed capabilities, each by name.
	Observations []ObservationDescriptor `json:"observations"`
	Actions      []ActionDescriptor      `json:"actions"`
}

// listed is what a snapshot shows of one capability: its view, and
// whether the snapshot leaves it out (hidden, or unavailable when the
// snapshot omits those).
type listed struct {
	capView
	omitted bool
}

// entries are the arrays one snapshot's component entries are cut from,
// each allocated once at its final size.
type entries struct {
	comps   []ComponentDescriptor
	obs     []ObservationDescriptor
	acts    []ActionDescriptor
	parents []Parent
}

// add appends the component entry of reg, whose capabilities have the
// states views, building each descriptor in its place in the snapshot's
// arrays.
func (es *entries) add(reg *registration, views []listed) {
	es.comps = append(es.comps, ComponentDescriptor{Type: reg.typ, InstanceID: reg.instance, RegistrationID: reg.id, Description: reg.description, Meta: reg.meta})
	c := &es.comps[len(es.comps)-1]
	if reg.parent != (Parent{}) {
		es.parents = append(es.parents, reg.parent)
		c.Parent = &es.parents[len(es.parents)-1]
	}
	o0, a0 := len(es.obs), len(es.acts)
	for i := range reg.nObs {
		v := views[i]
		if v.omitted {
			continue
		}
		rc := &reg.caps[i]
		es.obs = append(es.obs, ObservationDescriptor{
			CapabilityID: rc.id, Name: rc.name, Description: rc.def.description,
			OutputSchema: JSONText(rc.def.output.JSON()), Available: v.available(), UnavailableReason: v.reason, Meta: rc.meta,
		})
	}
	for i := reg.nObs; i < reg.nView; i++ {
		v := views[i]
		if v.omitted {
			continue
		}
		rc := &reg.caps[i]
		def := rc.def
		es.acts = append(es.acts, ActionDescriptor{
			CapabilityID: rc.id, Name: rc.name, Description: def.description,
			InputSchema: JSONText(def.input.JSON()),
			Declaration: Declaration{Effect: def.effect, Idempotent: def.idempotent, Reversible: def.reversible, Confirmation: def.confirmation},
			Available:   v.available(), UnavailableReason: v.reason, Meta: rc.meta,
		})
		if def.output != nil {
			es.acts[len(es.acts)-1].OutputSchema = JSONText(def.output.JSON())
		}
	}
	// Capped, so that appending to one entry's slices cannot write into
	// the next entry's.
	c.Observations = es.obs[o0:len(es.obs):len(es.obs)]
	c.Actions = es.acts[a0:len(es.acts):len(es.acts)]
}

// ObservationDescriptor describes one observation.
type ObservationDescriptor struct {
	CapabilityID      string   `json:"capabilityId"`
	Name              string   `json:"name"`
	Description       string   `json:"description"`
	OutputSchema      JSONText `json:"outputSchema"`
	Available         bool     `json:"available"`
	UnavailableReason string   `json:"unavailableReason,omitempty"`
	Meta              JSONText `json:"meta,omitempty"`
}

// ActionDescriptor describes one action.
type ActionDescriptor struct {
	CapabilityID string   `json:"capabilityId"`
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	InputSchema  JSONText `json:"inputSchema"`
	OutputSchema JSONText `json:"outputSchema,omitempty"`
	// Declaration is what the action declares about its calls; its
	// fields are the descriptor's own (in its JSON encoding too).
	Declaration
	Available         bool     `json:"available"`
	UnavailableReason string   `json:"unavailableReason,omitempty"`
	Meta              JSONText `json:"meta,omitempty"`
}

// Declaration is what a capability declares about its calls: the facts a
// client may rely on before calling it. It is one record from definition
// to wire: an [ActionDescriptor] embeds it (its fields are the
// descriptor's, in its JSON encoding too), the action's [Tool] carries it
// whole (the facts [Tool.Hints] derives from), and a surface's contract
// (package surface/contract) records each of its fields as a fact by JSON
// name. A field added here reaches all three with no other change than
// its definition ([ActionDef]) and its value where the snapshot fills the
// descriptor; the contract's diff needs a rule row for it (until it has
// one, a change of it is a mixed widening). Observations
// and procedure references declare some of these facts implicitly or in
// their own descriptor fields; their tools' Declaration is made from
// those (see [Tool]).
type Declaration struct {
	// Effect is the reach of a call.
	Effect Effect `json:"effect"`
	// Idempotent: repeating a call has no further effect.
	Idempotent bool `json:"idempotent"`
	// Reversible: what a call did can be undone.
	Reversible bool `json:"reversible"`
	// Confirmation is the declared confirmation level.
	Confirmation Confirmation `json:"confirmation"`
}

// ProcedureDescriptor describes a domain procedure reference bound to live
// context.
type ProcedureDescriptor struct {
	ProcedureID       string       `json:"procedureId"`
	Description       string       `json:"description"`
	ContextualNote    string       `json:"contextualNote,omitempty"`
	InputSchema       JSONText     `json:"inputSchema"`
	OutputSchema      JSONText     `json:"outputSchema,omitempty"`
	Effect            Effect       `json:"effect"`
	Confirmation      Confirmation `json:"confirmation"`
	Available         bool         `json:"available"`
	UnavailableReason string       `json:"unavailableReason,omitempty"`
	BoundFields       []BoundField `json:"boundFields"`
	RegistrationID    string       `json:"registrationId"`
	Context           *Parent      `json:"context,omitempty"`
	Meta              JSONText     `json:"meta,omitempty"`
}

// BoundField is an input field of a procedure reference filled from live UI
// state.
type BoundField struct {
	Path   string `json:"path"`
	Locked bool   `json:"locked"`
	Source string `json:"source"`
}

// timeLayout is the wire timestamp: UTC, millisecond precision, "Z".
const timeLayout = "2006-01-02T15:04:05.000Z"

// MarshalJSON encodes the snapshot in the spec's field order.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	comps, procs := s.Components, s.Procedures
	if comps == nil {
		comps = []ComponentDescriptor{}
	}
	if procs == nil {
		procs = []ProcedureDescriptor{}
	}
	return json.Marshal(struct {
		SurfaceID      string                `json:"surfaceId"`
		SurfaceVersion string                `json:"surfaceVersion"`
		CapturedAt     string                `json:"capturedAt"`
		Route          *Route                `json:"route,omitempty"`
		Components     []ComponentDescriptor `json:"components"`
		Procedures     []ProcedureDescriptor `json:"procedures"`
		Truncated      *Truncated            `json:"truncated,omitempty"`
	}{s.SurfaceID, s.SurfaceVersion, s.CapturedAt.UTC().Format(timeLayout), s.Route, comps, procs, s.Truncated})
}

// Snapshot returns the catalog of the live surface for a consumer. It is
// synchronous and side-effect free: it never calls Read handlers; it calls
// the When predicates of the listed capabilities and the route provider,
// without holding the registry lock.
func (r *Registry) Snapshot(opts SnapshotOptions) Snapshot {
	// Under the lock: the version, the live registrations and their
	// current states. User code (When, Describe, policies, the route
	// provider) runs after.
	consumer := opts.Consumer.normalized()
	r.mu.Lock()
	version := r.version.Load()
	closed := r.closed
	var live []*registration
	if consumer.Kind.Valid() { // a consumer of unknown kind sees nothing
		live = r.orderedLocked() // never changed once made: read on after unlocking
	}
	var states []*regState // nil while every state is the plain enabled one (the usual case)
	if slices.ContainsFunc(live, func(reg *registration) bool { return reg.st != enabledState }) {
		states = make([]*regState, len(live))
		for i, reg := range live {
			states[i] = reg.st
		}
	}
	r.mu.Unlock()
	stateOf := func(k int) *regState {
		if states == nil {
			return enabledState
		}
		return states[k]
	}

	snap := Snapshot{
		SurfaceID:      r.surfaceID,
		SurfaceVersion: strconv.FormatUint(version, 10),
		CapturedAt:     r.now(),
		Route:          r.currentRoute(),
		Procedures:     []ProcedureDescriptor{},
		Closed:         closed,
		static:         true,
	}
	if !consumer.Kind.Valid() {
		r.logUnknownConsumer(consumer)
	}

	// The entries' arrays, at their size when nothing is hidden or
	// omitted (the usual case).
	var es entries
	nComps, nObs, nActs, nParents := 0, 0, 0, 0
	for _, reg := range live {
		if (reg.nView > 0 || len(reg.caps) == 0) && inScope(reg.typ, opts.Scope) {
			nComps++
			nObs += reg.nObs
			nActs += reg.nView - reg.nObs
			if reg.parent != (Parent{}) {
				nParents++
			}
		}
	}
	es.comps = make([]ComponentDescriptor, 0, nComps)
	es.obs = make([]ObservationDescriptor, 0, nObs)
	es.acts = make([]ActionDescriptor, 0, nActs)
	if nParents > 0 {
		es.parents = make([]Parent, 0, nParents)
	}

	view := r.newView(consumer)
	var buf [8]listed // room for the states of most registrations' capabilities
	views := buf[:0]  // the capability states of one registration
	for k, reg := range live {
		listedType := inScope(reg.typ, opts.Scope)
		if !listedType && reg.nView == len(reg.caps) {
			continue // out of scope, and no procedures that could be in it
		}
		views = slices.Grow(views[:0], len(reg.caps))[:len(reg.caps)]
		hidden := 0
		for i := range reg.caps {
			rc := &reg.caps[i]
			if rc.def.when != nil || rc.discovers || rc.def.proc != nil && rc.def.proc.describe != nil {
				snap.static = false
			}
			v := view.see(reg, stateOf(k), rc)
			if v.seen == seenHidden && i < reg.nView {
				hidden++
			}
			views[i] = listed{capView: v, omitted: v.seen == seenHidden || !v.available() && opts.OmitUnavailable}
		}
		snap.Procedures = r.procedureDescriptors(snap.Procedures, reg, views, opts.Scope)
		switch {
		case reg.nView == 0 && len(reg.caps) > 0:
			continue // procedure-only: no component entry (a component with no capabilities at all is listed)
		case !listedType:
			continue // listed only for its procedures
		case hidden > 0 && hidden == reg.nView:
			continue // every capability is hidden: the component does not exist for this consumer
		}
		es.add(reg, views)
	}
	snap.Components = es.comps
	if b := opts.Budget; b != nil {
		snap.Components, snap.Truncated = applyBudget(es.comps, b)
	}
	return snap
}

// procedureDescriptors appends the listed procedure references of one
// registration, whose capabilities have the states views.
func (r *Registry) procedureDescriptors(out []ProcedureDescriptor, reg *registration, views []listed, scope []string) []ProcedureDescriptor {
	for i := reg.nView; i < len(reg.caps); i++ {
		st := views[i]
		if st.omitted || !capInScope(reg, i, scope) {
			continue
		}
		rc := &reg.caps[i]
		b := rc.bound
		d := rc.def
		pd := ProcedureDescriptor{
			ProcedureID: rc.id, Description: d.description,
			ContextualNote: r.contextualNote(rc),
			InputSchema:    JSONText(b.reduced.JSON()),
			Effect:         d.effect, Confirmation: d.confirmation,
			Available: st.available(), UnavailableReason: st.reason,
			BoundFields:    slices.Clone(b.fields),
			RegistrationID: reg.id, Context: b.contextRef(), Meta: rc.meta,
		}
		if pd.BoundFields == nil {
			pd.BoundFields = []BoundField{}
		}
		if d.output != nil {
			pd.OutputSchema = JSONText(d.output.JSON())
		}
		out = append(out, pd)
	}
	return out
}

// currentRoute asks the route provider, if any; a panic gives no route.
func (r *Registry) currentRoute() *Route {
	if r.opts.Route == nil {
		return nil
	}
	return guarded(r, "the route provider", "", nil, r.opts.Route)
}

// contextualNote reads a procedure's live note; a panic or "" gives none.
func (r *Registry) contextualNote(rc *regCap) string {
	if rc.def.proc.describe == nil {
		return ""
	}
	return clip(guarded(r, "Describe", rc.id, "", rc.def.proc.describe), maxMessage)
}

// inScope reports whether typ equals a prefix of scope or starts with it
// and a '.'; an empty scope admits everything.
func inScope(typ string, scope []string) bool {
	return len(scope) == 0 || slices.ContainsFunc(scope, func(p string) bool {
		rest, ok := strings.CutPrefix(typ, p)
		return ok && (rest == "" || rest[0] == '.')
	})
}

// capInScope reports whether capability i of reg is one a snapshot with
// this scope considers: a view capability when its component's type is in
// scope, a procedure reference when its context's type (or, without one,
// its path) is.
func capInScope(reg *registration, i int, scope []string) bool {
	if i < reg.nView {
		return inScope(reg.typ, scope)
	}
	rc := &reg.caps[i]
	if c := rc.bound.context; c != nil {
		return inScope(c.Type, scope)
	}
	return inScope(rc.name, scope)
}

// applyBudget drops components from the end (lowest priority, latest in
// order) until both caps hold: it keeps the longest prefix that fits.
func applyBudget(comps []ComponentDescriptor, b *Budget) ([]ComponentDescriptor, *Truncated) {
	n := len(comps)
	if b.MaxComponents > 0 && n > b.MaxComponents {
		n = b.MaxComponents
	}
	if b.MaxBytes > 0 {
		total := 1 // the opening bracket; each component adds itself and a comma or the closing bracket
		for i := range n {
			enc, err := json.Marshal(comps[i])
			if err != nil { // descriptors are built from valid JSON; cannot happen
				panic("surface: encoding a component descriptor: " + err.Error())
			}
			total += len(enc) + 1
			if total > b.MaxBytes {
				n = i
				break
			}
		}
	}
	if n == len(comps) {
		return comps, nil
	}
	return comps[:n:n], &Truncated{DroppedComponents: len(comps) - n}
}
