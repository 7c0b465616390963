package surface

import (
	"cmp"
	"slices"
	"strings"
)

// target is what resolution found: the registration and capability a
// call reaches, the registration's state as resolution read it (phase 3
// judges it), and the consumer's policy decision on the capability, which
// resolution needed to know the consumer sees it.
type target struct {
	reg      *registration
	cap      *regCap
	st       *regState
	decision Decision
}

// resolve runs phase 2 (semantics §9) through the consumer view v, then the
// version gate. It considers only the candidates the consumer sees: those
// a policy hides from the consumer are dropped before ambiguity,
// staleness or tombstones are decided, so the answer is the one a
// registry in which they were never registered would give (see the
// package documentation, Visibility). AMBIGUOUS_INSTANCE lists the
// instances the consumer sees, liveRegistrationId names a registration it
// sees, and a tombstone answers only if the consumer could discover what
// it remembers.
//
// A call that names its registration (or the instance of a view
// capability) costs the same whatever the number of instances of the
// type: the named candidate is looked up directly, and the others are
// collected only when it is not one the consumer sees.
func (r *Registry) resolve(a *attempt, v *consumerView) (target, *Error) {
	inv := &a.inv
	id, ok := parseCapabilityID(inv.CapabilityID)
	if !ok {
		return target{}, notFound()
	}
	var hidden *registration // the registration the request names, if the consumer cannot see its capability
	if inv.RegistrationID != "" || inv.InstanceID != "" && id.Plane == PlaneView {
		r.mu.RLock()
		c, named := r.namedLocked(id, inv.RegistrationID, inv.InstanceID)
		r.mu.RUnlock()
		if named {
			if d := v.decision(c.reg, c.cap); d.verdict != hide {
				return r.gate(inv, target{c.reg, c.cap, c.st, d})
			}
			hidden = c.reg
		}
		if inv.RegistrationID == "" { // a view capability's instance: the only candidate
			return target{}, r.noneSeen(v, inv.CapabilityID)
		}
	}

	if inv.RegistrationID != "" { // it names none of the candidates the consumer sees
		live, ok := r.firstSeen(v, id, inv.InstanceID, hidden)
		if !ok {
			return target{}, r.notLive(v, inv.RegistrationID, nil)
		}
		return target{}, r.notLive(v, inv.RegistrationID, &live)
	}
	var buf [4]candidate
	r.mu.RLock()
	cands := r.candidatesLocked(buf[:0], id, inv.InstanceID)
	r.mu.RUnlock()
	seen := cands[:0]  // the candidates the consumer sees, in order
	var first Decision // the consumer's decision on seen[0]
	for _, c := range cands {
		d := v.decision(c.reg, c.cap)
		if d.verdict == hide {
			continue
		}
		if len(seen) == 0 {
			first = d
		}
		seen = append(seen, c)
	}
	switch len(seen) {
	case 0:
		return target{}, r.noneSeen(v, inv.CapabilityID)
	case 1:
		c := seen[0]
		return r.gate(inv, target{c.reg, c.cap, c.st, first})
	}
	return target{}, ambiguous(seen)
}

// gate applies the version gate to a resolved target: a stale surface
// version hint only stops dangerous procedures.
func (r *Registry) gate(inv *Invocation, t target) (target, *Error) {
	if e := t.cap.def.effect; inv.SurfaceVersion != "" && (e == EffectDestructive || e == EffectExternalSideEffect) &&
		inv.SurfaceVersion != r.Version() {
		return target{}, NewReasonError(CodeStaleCapability, ReasonSurfaceVersionMismatch, "")
	}
	return t, nil
}

// candidate is a live capability an id may resolve to, with its
// registration's state as read under the lock.
type candidate struct {
	reg *registration
	cap *regCap
	st  *regState
}

// instance is what an instance id selects and sorts candidates by: the
// component's instance for view capabilities, the reference's context
// instance for procedures.
func (c candidate) instance() string {
	if b := c.cap.bound; b != nil {
		return b.instance()
	}
	return c.reg.instance
}

// capability returns reg's capability with the parsed id, or nil.
func (reg *registration) capability(id parsedID) *regCap {
	if id.Plane == PlaneView {
		if reg.typ != id.Type {
			return nil
		}
		if i := slices.IndexFunc(reg.caps[:reg.nView], func(rc regCap) bool { return rc.name == id.Name }); i >= 0 {
			return &reg.caps[i]
		}
		return nil
	}
	if i := slices.IndexFunc(reg.caps[reg.nView:], func(rc regCap) bool { return rc.name == id.Path }); i >= 0 {
		return &reg.caps[reg.nView+i]
	}
	return nil
}

// namedLocked returns the live candidate a request names directly: the
// registration regID when it is set, else the instance of a view
// capability. It reports false when that registration or instance is not
// live, lacks the capability, or is not of the instance the request asks
// for.
func (r *Registry) namedLocked(id parsedID, regID, instance string) (candidate, bool) {
	var reg *registration
	if regID != "" {
		reg = r.byID[regID]
	} else {
		reg = r.instanceLocked(id.Type, instance)
	}
	if reg == nil {
		return candidate{}, false
	}
	rc := reg.capability(id)
	if rc == nil {
		return candidate{}, false
	}
	c := candidate{reg, rc, reg.st}
	if instance != "" && c.instance() != instance {
		return candidate{}, false
	}
	return c, true
}

// candidatesLocked appends to cands the live capabilities with the id,
// filtered by instance when one is given, sorted by instance, then
// registration id.
func (r *Registry) candidatesLocked(cands []candidate, id parsedID, instance string) []candidate {
	if id.Plane == PlaneView {
		add := func(reg *registration) {
			if rc := reg.capability(id); rc != nil {
				cands = append(cands, candidate{reg, rc, reg.st})
			}
		}
		if instance != "" {
			if reg := r.instanceLocked(id.Type, instance); reg != nil {
				add(reg)
			}
			return cands
		}
		for _, reg := range r.byType[id.Type] {
			add(reg)
		}
	} else {
		for _, reg := range r.byProc[id.Path] {
			if c := (candidate{reg, reg.capability(id), reg.st}); instance == "" || c.instance() == instance {
				cands = append(cands, c)
			}
		}
	}
	if len(cands) > 1 {
		slices.SortFunc(cands, candidateCmp)
	}
	return cands
}

// candidateCmp orders candidates by instance, then registration id.
func candidateCmp(x, y candidate) int {
	return cmp.Or(strings.Compare(x.instance(), y.instance()), strings.Compare(x.reg.id, y.reg.id))
}

// eachCandidateLocked calls f with each live capability with the id,
// of the instance when one is given, in no particular order.
func (r *Registry) eachCandidateLocked(id parsedID, instance string, f func(candidate)) {
	if id.Plane == PlaneView {
		if instance != "" {
			if reg := r.instanceLocked(id.Type, instance); reg != nil {
				if rc := reg.capability(id); rc != nil {
					f(candidate{reg, rc, reg.st})
				}
			}
			return
		}
		for _, reg := range r.byType[id.Type] {
			if rc := reg.capability(id); rc != nil {
				f(candidate{reg, rc, reg.st})
			}
		}
		return
	}
	for _, reg := range r.byProc[id.Path] {
		if c := (candidate{reg, reg.capability(id), reg.st}); instance == "" || c.instance() == instance {
			f(c)
		}
	}
}

// firstSeen returns the first, in candidate order, of the live
// capabilities with the id (of the instance, if given) that the consumer
// sees; the registration hidden is known not to be one. It takes one pass
// over the candidates and sorts nothing: those without discovery policies
// are judged under the lock (no user code runs), the others after it, and
// only while they would come first.
func (r *Registry) firstSeen(v *consumerView, id parsedID, instance string, hidden *registration) (best candidate, ok bool) {
	var judge []candidate // with discovery policies, ahead of best when met
	r.mu.RLock()
	r.eachCandidateLocked(id, instance, func(c candidate) {
		switch {
		case c.reg == hidden || ok && candidateCmp(c, best) >= 0:
		case c.cap.discovers:
			judge = append(judge, c)
		default:
			best, ok = c, true
		}
	})
	r.mu.RUnlock()
	for _, c := range judge {
		if (!ok || candidateCmp(c, best) < 0) && v.decision(c.reg, c.cap).verdict != hide {
			best, ok = c, true
		}
	}
	return best, ok
}

// notLive is the failure of a call whose registration id names none of
// the live candidates the consumer sees (live is the first of those, or
// nil): replaced, unmounted, reloaded or unknown. A tombstone counts only
// if the consumer could discover the registration it remembers.
func (r *Registry) notLive(v *consumerView, regID string, live *candidate) *Error {
	now := r.now()
	r.mu.RLock()
	ts, tomb := r.tombs.byRegistration(regID, now)
	r.mu.RUnlock()
	tomb = tomb && v.sees(&ts)
	switch {
	case tomb && live != nil:
		return NewError(CodeStaleCapability, "", map[string]any{"reason": string(ReasonRegistrationReplaced), "liveRegistrationId": live.reg.id})
	case tomb:
		return unmountedAtResolve()
	case live != nil:
		return NewError(CodeStaleCapability, "", map[string]any{"reason": string(ReasonSurfaceReloaded), "liveRegistrationId": live.reg.id})
	}
	return notFound()
}

// noneSeen is the failure of a call without a registration id for which
// the consumer sees no live candidate: COMPONENT_UNMOUNTED if a live
// tombstone lists the capability and the consumer could discover it
// there, else CAPABILITY_NOT_FOUND.
func (r *Registry) noneSeen(v *consumerView, capID string) *Error {
	now := r.now()
	var buf [2]tombstone
	r.mu.RLock()
	tombs := r.tombs.listing(buf[:0], capID, now)
	r.mu.RUnlock()
	for i := range tombs {
		if !v.hides(&tombs[i], tombs[i].capability(capID)) {
			return unmountedAtResolve()
		}
	}
	return notFound()
}

// ambiguous is the AMBIGUOUS_INSTANCE of several candidates the consumer
// sees.
func ambiguous(seen []candidate) *Error {
	refs := make([]InstanceRef, len(seen))
	for i, c := range seen {
		refs[i] = InstanceRef{InstanceID: c.instance(), RegistrationID: c.reg.id}
		if b := c.cap.bound; b != nil {
			refs[i].Context = b.contextRef()
		} else {
			refs[i].Description = c.reg.description
		}
	}
	return NewError(CodeAmbiguousInstance, "", map[string]any{"instances": refs})
}

func notFound() *Error { return NewError(CodeCapabilityNotFound, "", nil) }

func unmountedAtResolve() *Error {
	return NewError(CodeComponentUnmounted, "", map[string]any{"phase": "resolve"})
}
