package surface

import "fmt"

// The consumer view (DESIGN decision 19): what one consumer sees of a
// capability. It is decided here and nowhere else: Snapshot lists what it
// says, Explain shows it with each policy's vote, and Invoke resolves
// through it, dropping what the consumer cannot see before it decides
// ambiguity, staleness, tombstones or availability (resolve.go). The
// toolset and the MCP adapter build on Snapshot and Invoke, so they see
// what the consumer sees.
//
// The rule, in order: a capability that a policy of its chain hides for
// the consumer is hidden (it does not exist for them: no other state of
// it shows); else one that a policy disables is listed unavailable with
// the first disabling policy's reason; else it is listed with its
// availability (availability.go): unavailable with the state's reason, or
// available.

// seen is what a consumer sees of a capability.
type seen uint8

const (
	seenAvailable   seen = iota // listed and available
	seenUnavailable             // listed, unavailable because of the state (disabled component, override, When)
	seenDisabled                // listed, unavailable because a policy disabled it for this consumer
	seenHidden                  // absent: for this consumer it does not exist
)

// capView is what a consumer sees of one capability: hidden, or listed
// with its availability and, when unavailable, the reason.
type capView struct {
	seen   seen
	reason string
}

// public is the view's exported form.
func (v capView) public() View {
	return [...]View{seenAvailable: ViewAvailable, seenUnavailable: ViewUnavailable, seenDisabled: ViewDisabled, seenHidden: ViewHidden}[v.seen]
}

// available reports whether the capability is listed and available.
func (v capView) available() bool { return v.seen == seenAvailable }

// viewOf is the rule of the consumer view: the policies' decision d first
// (hide, then disable), then the availability, which avail computes only
// when the decision leaves it to the state.
func viewOf(d Decision, avail func() (bool, string)) capView {
	switch d.verdict {
	case hide:
		return capView{seen: seenHidden}
	case disable:
		return capView{seen: seenDisabled, reason: d.reason}
	}
	if ok, reason := avail(); !ok {
		return capView{seen: seenUnavailable, reason: reason}
	}
	return capView{}
}

// consumerView computes what one consumer sees, for one Snapshot, Explain
// or Invoke. It reads the host context at most once, when a Discover hook
// first needs it or the invocation hands it to policies and handlers, so
// that every decision of one call sees the same host context. It is not
// safe for concurrent use.
type consumerView struct {
	r        *Registry
	consumer Consumer // normalized
	// pc is the context policies see, filled for one capability at a
	// time; made when the first Discover hook runs (or the pipeline hands
	// it to authorize and invoke hooks).
	pc       *PolicyContext
	host     map[string]any
	hostRead bool
}

// newView returns the view of consumer c (normalized).
func (r *Registry) newView(c Consumer) consumerView {
	return consumerView{r: r, consumer: c}
}

// hostContext returns the host context, read on the first call.
func (v *consumerView) hostContext() map[string]any {
	if !v.hostRead {
		v.host, v.hostRead = v.r.hostContext(), true
	}
	return v.host
}

// policyContext returns the view's policy context, with the consumer, the
// host context and the environment set.
func (v *consumerView) policyContext() *PolicyContext {
	if v.pc == nil {
		v.pc = &PolicyContext{Consumer: v.consumer, Host: v.hostContext(), Environment: v.r.opts.Environment, r: v.r}
	}
	return v.pc
}

// see is the consumer view of capability rc of registration reg, whose
// state is st.
func (v *consumerView) see(reg *registration, st *regState, rc *regCap) capView {
	return v.with(v.decision(reg, rc), st, rc)
}

// with is the view of a capability whose policy decision d is known.
func (v *consumerView) with(d Decision, st *regState, rc *regCap) capView {
	return viewOf(d, func() (bool, string) { return v.r.availability(st, rc) })
}

// decision is the policies' decision on capability rc of reg for the
// consumer: the Discover hooks of its chain, composed as [Policy] says
// (any hide wins, else the first disable, else expose).
func (v *consumerView) decision(reg *registration, rc *regCap) Decision {
	if !rc.discovers {
		return Decision{}
	}
	pc := v.policyContext()
	pc.fill(reg, rc)
	return v.r.decide(rc.chain, pc, nil)
}

// hides reports whether the chain of a tombstone's capability hides it
// from the consumer.
func (v *consumerView) hides(ts *tombstone, tc *tombCap) bool {
	if !tc.discovers {
		return false
	}
	pc := v.policyContext()
	pc.fillTomb(ts, tc)
	return v.r.decide(tc.chain, pc, nil).verdict == hide
}

// sees reports whether the consumer could discover the registration a
// tombstone remembers, were it live: it had no capability, or the
// consumer sees at least one of them. (A registration whose every
// capability is hidden does not exist for the consumer.)
func (v *consumerView) sees(ts *tombstone) bool {
	if len(ts.caps) == 0 {
		return true
	}
	for i := range ts.caps {
		if !v.hides(ts, &ts.caps[i]) {
			return true
		}
	}
	return false
}

// decide runs the Discover hooks of chain for the capability pc describes
// and composes their votes: any hide wins, else the first disable's
// reason, else expose. A panicking hook votes hide. With votes nil it
// stops at the first hide; otherwise (Explain) it runs every hook and
// records each vote in votes[i], for policy i of the chain.
func (r *Registry) decide(chain []Policy, pc *PolicyContext, votes []PolicyExplanation) Decision {
	out := Decision{}
	for i := range chain {
		if chain[i].Discover == nil {
			continue
		}
		d, panicked := r.discoverOne(&chain[i], pc)
		if votes != nil {
			votes[i].Vote, votes[i].Reason, votes[i].Panicked = d.verdict.String(), d.reason, panicked
		}
		if out = stricter(out, d); out.verdict == hide && votes == nil {
			return out
		}
	}
	return out
}

// stricter composes a chain's decision so far with one more vote: any hide
// wins, else the first disable.
func stricter(out, d Decision) Decision {
	if d.verdict == hide || d.verdict == disable && out.verdict == expose {
		return d
	}
	return out
}

// discoverOne runs one Discover hook; a panic hides, and reports panicked.
func (r *Registry) discoverOne(p *Policy, pc *PolicyContext) (d Decision, panicked bool) {
	defer func() {
		if rec := recover(); rec != nil {
			r.opts.Logger.Error("surface: policy Discover panicked; the capability is hidden", "policy", p.Name, "capabilityId", pc.CapabilityID, "panic", fmt.Sprint(rec))
			d, panicked = Hide(), true
		}
	}()
	return p.Discover(pc), false
}

// hostContext reads the host context; a panicking provider gives an empty
// context. Callers read it once per call (consumerView.hostContext).
func (r *Registry) hostContext() map[string]any {
	if r.opts.Context == nil {
		return nil
	}
	return guarded(r, "the host context provider", "", map[string]any{}, r.opts.Context)
}

// fill points pc at one capability.
func (pc *PolicyContext) fill(reg *registration, rc *regCap) {
	pc.CapabilityID = rc.id
	pc.Plane = planeOf(rc.id)
	pc.Kind = rc.def.kind
	pc.Effect = rc.def.effect
	pc.RegistrationID = reg.id
	pc.ComponentMeta = reg.metaMap
	pc.CapabilityMeta = rc.metaMap
	pc.Internal = reg.internal
}

// fillTomb points pc at a capability of an unregistered registration: the
// context its policies saw while it was live.
func (pc *PolicyContext) fillTomb(ts *tombstone, tc *tombCap) {
	pc.CapabilityID = tc.id
	pc.Plane = planeOf(tc.id)
	pc.Kind = tc.kind
	pc.Effect = tc.effect
	pc.RegistrationID = ts.regID
	pc.ComponentMeta = ts.meta
	pc.CapabilityMeta = tc.meta
	pc.Internal = ts.internal
}

// String returns "expose", "disable" or "hide".
func (v verdict) String() string {
	return [...]string{expose: "expose", disable: "disable", hide: "hide"}[v]
}
