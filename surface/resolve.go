package surface

import (
	"cmp"
	"slices"
	"strings"
)

// resolve runs phase 2: it finds the target registration and capability
// (semantics §9), then applies the version gate. It returns the
// registration's state as it found it, for phase 3.
func (r *Registry) resolve(a *attempt) (*regState, *Error) {
	inv := &a.inv
	id, ok := parseCapabilityID(inv.CapabilityID)
	if !ok {
		return nil, NewError(CodeCapabilityNotFound, "", nil)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var buf [4]candidate
	cands := r.candidatesLocked(buf[:0], id, inv.InstanceID)
	i := 0 // the only candidate, unless a registration id picks one
	switch {
	case inv.RegistrationID != "":
		i = slices.IndexFunc(cands, func(c candidate) bool { return c.reg.id == inv.RegistrationID })
		if i < 0 {
			return nil, r.notLiveLocked(inv.RegistrationID, cands)
		}
	case len(cands) != 1:
		return nil, r.noneOrManyLocked(inv.CapabilityID, cands)
	}
	a.reg, a.cap = cands[i].reg, cands[i].cap
	// The version gate: a stale hint only stops dangerous procedures.
	if e := a.cap.def.effect; inv.SurfaceVersion != "" && (e == EffectDestructive || e == EffectExternalSideEffect) &&
		inv.SurfaceVersion != r.Version() {
		return nil, NewError(CodeStaleCapability, "", map[string]any{"reason": "surface-version-mismatch"})
	}
	return a.reg.st, nil
}

// candidate is a live capability an id may resolve to.
type candidate struct {
	reg *registration
	cap *regCap
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

// candidatesLocked appends to cands the live capabilities with the id,
// filtered by instance when one is given, sorted by instance, then
// registration id.
func (r *Registry) candidatesLocked(cands []candidate, id parsedID, instance string) []candidate {
	if id.Plane == PlaneView {
		add := func(reg *registration) {
			if i := slices.IndexFunc(reg.caps[:reg.nView], func(rc regCap) bool { return rc.name == id.Name }); i >= 0 {
				cands = append(cands, candidate{reg, &reg.caps[i]})
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
			i := reg.nView + slices.IndexFunc(reg.caps[reg.nView:], func(rc regCap) bool { return rc.name == id.Path })
			if c := (candidate{reg, &reg.caps[i]}); instance == "" || c.instance() == instance {
				cands = append(cands, c)
			}
		}
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		return cmp.Or(strings.Compare(x.instance(), y.instance()), strings.Compare(x.reg.id, y.reg.id))
	})
	return cands
}

// notLiveLocked is the failure of a call whose registration id names none
// of the live candidates: replaced, unmounted, reloaded or unknown.
func (r *Registry) notLiveLocked(regID string, cands []candidate) *Error {
	tomb := r.tombs.byRegistration(regID, r.now())
	switch {
	case tomb && len(cands) > 0:
		return NewError(CodeStaleCapability, "", map[string]any{"reason": "registration-replaced", "liveRegistrationId": cands[0].reg.id})
	case tomb:
		return NewError(CodeComponentUnmounted, "", map[string]any{"phase": "resolve"})
	case len(cands) > 0:
		return NewError(CodeStaleCapability, "", map[string]any{"reason": "surface-reloaded", "liveRegistrationId": cands[0].reg.id})
	}
	return NewError(CodeCapabilityNotFound, "", nil)
}

// noneOrManyLocked is the failure of a call without a registration id that
// matches no live candidate or several.
func (r *Registry) noneOrManyLocked(capID string, cands []candidate) *Error {
	if len(cands) == 0 {
		if r.tombs.listing(capID, r.now()) {
			return NewError(CodeComponentUnmounted, "", map[string]any{"phase": "resolve"})
		}
		return NewError(CodeCapabilityNotFound, "", nil)
	}
	refs := make([]InstanceRef, len(cands))
	for i, c := range cands {
		refs[i] = InstanceRef{InstanceID: c.instance(), RegistrationID: c.reg.id}
		if b := c.cap.bound; b != nil {
			refs[i].Context = b.contextRef()
		} else {
			refs[i].Description = c.reg.description
		}
	}
	return NewError(CodeAmbiguousInstance, "", map[string]any{"instances": refs})
}
