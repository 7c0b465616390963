package surface

import (
	"maps"
	"slices"
)

// Handle controls one registration. Its methods are safe for concurrent
// use; after the registration is gone they do nothing.
type Handle struct {
	r   *Registry
	reg *registration
}

func (reg *registration) handle(r *Registry) *Handle {
	reg.h = Handle{r: r, reg: reg}
	return &reg.h
}

// ID returns the registration id ("reg_…"), also for rejected handles.
func (h *Handle) ID() string { return h.reg.id }

// Status reports whether the registration is live.
func (h *Handle) Status() HandleStatus {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.reg.status
}

// regState is the mutable part of a registration. It is immutable once
// stored: a change stores a new one, so snapshots may keep the old one.
type regState struct {
	disabled  bool
	overrides map[string]Availability
}

// Shared states of registrations without overrides.
var (
	enabledState  = &regState{}
	disabledState = &regState{disabled: true}
)

// Unregister removes the registration: its capabilities disappear from
// later snapshots and a tombstone remembers its id for a while, so late
// calls get COMPONENT_UNMOUNTED. Unregistering twice does nothing.
func (h *Handle) Unregister() {
	r := h.r
	if !h.lockActive("") {
		return
	}
	now := r.now()
	r.unregisterLocked(h.reg, now)
	r.unlockAndDrain()
	r.observeUnregistered(h.reg) // observe: the registration is gone
	r.audit(AuditEvent{Type: AuditUnregistration, RegistrationID: h.reg.id, At: now})
}

// Invalidate bumps the surface version without changing anything, so
// consumers re-discover. It does nothing on a dead handle.
func (h *Handle) Invalidate() {
	if !h.lockActive("Invalidate") {
		return
	}
	h.r.bumpLocked()
	h.r.unlockAndDrain()
}

// lockActive locks the registry and reports whether the registration is
// active. When it is not, it unlocks and, in development, warns that op
// did nothing (an empty op does nothing silently).
func (h *Handle) lockActive(op string) bool {
	h.r.mu.Lock()
	if h.reg.status == HandleActive && !h.r.closed {
		return true
	}
	h.r.mu.Unlock()
	if op != "" && h.r.opts.Environment.isDev() {
		h.r.opts.Logger.Warn("surface: "+op+" on a registration that is not active", "registrationId", h.reg.id)
	}
	return false
}

// Update pushes dynamic state: the disabled flag and per-capability
// availability overrides. Only these are updatable; anything structural
// needs a new registration. A call that changes something bumps the
// surface version once; each new or different override emits
// availability-changed. Overrides are keyed by capability name (or full
// capability id) and cannot be removed: set Available true to stop one
// from blocking.
type Update struct {
	// Disabled, when non-nil, sets the component's disabled flag: a
	// disabled component's capabilities are visible but unavailable
	// ("component-disabled").
	Disabled *bool
	// Availability sets overrides by capability name.
	Availability map[string]Availability
}

// Update applies u. It does nothing on a dead handle.
func (h *Handle) Update(u Update) {
	r := h.r
	if !h.lockActive("Update") {
		return
	}
	old := h.reg.st // published states are immutable: changes go to a copy
	st := &regState{disabled: old.disabled, overrides: maps.Clone(old.overrides)}
	changed := u.Disabled != nil && *u.Disabled != old.disabled
	if changed {
		st.disabled = *u.Disabled
	}
	for _, key := range slices.Sorted(maps.Keys(u.Availability)) {
		a := u.Availability[key]
		if prev, ok := old.overrides[key]; ok && prev == a {
			continue
		}
		if st.overrides == nil {
			st.overrides = make(map[string]Availability)
		}
		st.overrides[key] = a
		changed = true
		emitLocked(r, AvailabilityChanged{RegistrationID: h.reg.id, CapabilityID: h.reg.capabilityID(key), Available: a.Available})
	}
	if changed {
		h.reg.st = st
		r.bumpLocked()
	}
	r.unlockAndDrain()
}

// capabilityID resolves an override key (a name or a full id) to a
// capability id, else returns the key.
func (reg *registration) capabilityID(key string) string {
	if i := slices.IndexFunc(reg.caps, func(c regCap) bool { return c.name == key || c.id == key }); i >= 0 {
		return reg.caps[i].id
	}
	return key
}
