package surface

import "slices"

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
// A call that names its registration or instance costs the same whatever
// the number of instances of the type or references of the procedure:
// the registration is looked up by id, and an instance, the candidates
// of an instance and the first candidate a stale call is pointed to are
// found by binary search in the candidates, which the indexes keep in
// order (index.go). What can grow is only what the answer depends on:
// the candidates hidden from the consumer that come before the first it
// sees, and, for a call that names neither, the candidates
// AMBIGUOUS_INSTANCE lists.
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
	capRef
	st *regState
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
	c := candidate{capRef{reg, rc}, reg.st}
	if instance != "" && c.instance() != instance {
		return candidate{}, false
	}
	return c, true
}

// candidatesLocked appends to cands the live capabilities with the
// capability id, of the instance when one is given, in order: by
// instance, then registration id.
func (r *Registry) candidatesLocked(cands []candidate, id parsedID, instance string) []candidate {
	cs := r.candidatesOfLocked(id)
	for i := cs.from(instance, capRef{}); i < cs.len(); i++ {
		c := cs.at(i)
		if instance != "" && c.instance() != instance {
			break
		}
		cands = append(cands, candidate{c, c.reg.st})
	}
	return cands
}

// seenBatch is how many candidates with discovery policies firstSeen
// takes from the index per read lock, to judge them after releasing it.
const seenBatch = 8

// firstSeen returns the first, in candidate order, of the live
// capabilities with the capability id (of the instance, if given) that
// the consumer sees; the registration hidden is known not to be one. It
// starts at the first candidate (of the instance) and stops at the first
// seen: one without discovery policies is seen (no user code runs under
// the lock); those with discovery policies ahead of it are judged after
// the lock is released, up to seenBatch at a time, resuming at their
// place if none is seen. A candidate registered meanwhile ahead of that
// place is not considered, as one registered after the call.
func (r *Registry) firstSeen(v *consumerView, id parsedID, instance string, hidden *registration) (capRef, bool) {
	var batch [seenBatch]capRef // with discovery policies, in order, to judge
	var after capRef            // the last judged: the next look starts after it
	for {
		var sure capRef // the first without discovery policies, after the batch
		n, more := 0, false
		r.mu.RLock()
		cs := r.candidatesOfLocked(id)
		for i := cs.from(instance, after); i < cs.len(); i++ {
			c := cs.at(i)
			if instance != "" && c.instance() != instance {
				break
			}
			if c.reg == hidden {
				continue
			}
			if !c.cap.discovers {
				sure = c
				break
			}
			if n == len(batch) {
				more = true
				break
			}
			batch[n] = c
			n++
		}
		r.mu.RUnlock()
		for _, c := range batch[:n] {
			if v.decision(c.reg, c.cap).verdict != hide {
				return c, true
			}
		}
		if sure.reg != nil {
			return sure, true
		}
		if !more {
			return capRef{}, false
		}
		after = batch[n-1]
	}
}

// notLive is the failure of a call whose registration id names none of
// the live candidates the consumer sees (live is the first of those, or
// nil): replaced, unmounted, reloaded or unknown. A tombstone counts only
// if the consumer could discover the registration it remembers.
func (r *Registry) notLive(v *consumerView, regID string, live *capRef) *Error {
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
