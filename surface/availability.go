package surface

// Availability (semantics §8.4): what the current state allows, whoever
// asks. A component's disabled flag, the pushed overrides and the When
// predicates decide it, at snapshot and again at invocation (phase 3);
// policies, which decide per consumer, are the consumer view's part
// (view.go).

// availability computes a capability's availability (spec 03
// "Availability"; the first reason wins).
func (r *Registry) availability(st *regState, c *regCap) (bool, string) {
	if st == enabledState && c.def.when == nil {
		return true, "" // the common case
	}
	if st.disabled {
		return false, string(ReasonComponentDisabled)
	}
	if a, ok := st.override(c); ok && !a.Available {
		if a.Reason == "" {
			return false, string(ReasonUnavailable)
		}
		return false, a.Reason
	}
	switch r.evalWhen(c) {
	case whenFailed:
		return false, string(ReasonWhenError)
	case whenFalse:
		return false, r.unavailableReason(c)
	}
	return true, ""
}

const defaultUnavailableReason = "Currently unavailable"

// unavailableReason is the reason of a capability whose When is false:
// UnavailableReasonFunc's (live), else UnavailableReason, else the default.
func (r *Registry) unavailableReason(c *regCap) string {
	reason := c.def.reason
	if fn := c.def.reasonFn; fn != nil {
		reason = guarded(r, "UnavailableReasonFunc", c.id, "", fn)
	}
	if reason == "" {
		return defaultUnavailableReason
	}
	return reason
}

// Availability is a pushed availability override for one capability.
type Availability struct {
	// Available false makes the capability unavailable; true stops an
	// earlier override from blocking.
	Available bool
	// Reason is shown to the agent when unavailable. Default "unavailable".
	Reason string
}

// override returns the override that applies to capability c, if any.
func (st *regState) override(c *regCap) (Availability, bool) {
	if a, ok := st.overrides[c.name]; ok {
		return a, true
	}
	a, ok := st.overrides[c.id]
	return a, ok
}

// Refresh re-evaluates the When predicates of the registration's
// capabilities and pushes what changed since the last Refresh (the first
// Refresh compares against what When said at Register): one
// availability-changed event per flipped capability and, if anything
// flipped, one version bump. Go apps have no render loop, so call Refresh
// when the state behind a When changes; event-driven adapters (MCP
// tools/list_changed) then see it.
func (h *Handle) Refresh() {
	r, reg := h.r, h.reg
	if len(reg.caps) == 0 {
		return
	}
	now := make([]bool, len(reg.caps))
	for i := range reg.caps {
		now[i] = r.evalWhen(&reg.caps[i]) == whenTrue // user code: outside the lock
	}
	if !h.lockActive("Refresh") {
		return
	}
	st := reg.st
	changed := false
	for k := range reg.caps {
		rc := &reg.caps[k]
		if rc.whenOff == !now[k] {
			continue
		}
		rc.whenOff = !now[k]
		changed = true
		a, overridden := st.override(rc)
		avail := now[k] && !st.disabled && (!overridden || a.Available)
		emitLocked(r, AvailabilityChanged{RegistrationID: reg.id, CapabilityID: rc.id, Available: avail})
	}
	if changed {
		r.bumpLocked()
	}
	r.unlockAndDrain()
}

// whenResult is what a capability's When predicate said.
type whenResult int

const (
	whenTrue   whenResult = iota // or there is no predicate
	whenFalse                    // unavailable, with the capability's reason
	whenFailed                   // it panicked: unavailable, "when-error"
)

// evalWhen runs a capability's When predicate.
func (r *Registry) evalWhen(c *regCap) whenResult {
	if c.def.when == nil {
		return whenTrue
	}
	return guarded(r, "When", c.id, whenFailed, func() whenResult {
		if c.def.when() {
			return whenTrue
		}
		return whenFalse
	})
}
