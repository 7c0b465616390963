package surface

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Component is the definition of anything with a lifecycle that exposes
// capabilities: a server-side page or view, a TUI screen, a job. Register
// it when it mounts and unregister the handle when it unmounts.
//
// Structural fields are copied and frozen by [Registry.Register]; the
// registry keeps the capabilities' functions and calls them live.
type Component struct {
	// Type is the component type, dot-separated segments matching
	// ^[a-z][a-z0-9-]*$ ("devices.table"), at most 128 long.
	Type string
	// InstanceID distinguishes simultaneous mounts of one type; derive it
	// from data (an entity id, a slot name), never from render order.
	// Default "default"; ^[A-Za-z0-9_-]+$, at most 128 long.
	InstanceID string
	// Description is agent-visible: required, at most
	// Limits.MaxComponentDescription UTF-16 code units.
	Description string
	// Parent optionally links to a containing component.
	Parent *Parent
	// Meta is agent-visible metadata: a JSON record of at most
	// Limits.MaxMetaBytes bytes. Never put secrets here.
	Meta map[string]any
	// Internal is metadata for policies and audit sinks. It is never
	// serialized into snapshots or any agent-facing payload.
	Internal map[string]any
	// Origin is the registrant's trust label for the OnRegister guard.
	// Default "first-party".
	Origin string
	// Priority orders snapshots (higher first) and survives budgets
	// longer. Default 0.
	Priority int
	// Disabled makes every capability visible but unavailable
	// ("component-disabled"). Toggle it later with Handle.Update.
	Disabled bool
	// Policies apply to every capability of the component, inside the
	// registry's.
	Policies []Policy
	// Observations are the component's reads, by capability name
	// (^[a-z][A-Za-z0-9]*$), built with [Observation].
	Observations map[string]Capability
	// Actions are the component's view actions, by capability name, built
	// with [Action]. A name may not be both an observation and an action.
	Actions map[string]Capability
	// Procedures are references to domain operations, built with
	// [Procedure], in the order they are listed. They need an executor
	// ([Registry.SetProcedureExecutor]) whose manifest lists their paths.
	// A component with only procedures has no entry in snapshots: its
	// references appear among the snapshot's procedures.
	Procedures []Capability
}

// checkDescription reports a missing or over-long description.
func checkDescription(s string, max int) *DefinitionError {
	if strings.TrimSpace(s) == "" {
		return defErr(DefinitionInvalid, "description", "a non-empty description is required")
	}
	if n := jsLen(s); n > max {
		return defErr(DefinitionLimitExceeded, "description", fmt.Sprintf("description is %d characters, more than the limit of %d", n, max))
	}
	return nil
}

// buildRegistration validates c and freezes its structure. The only user
// code it runs is each capability's When, for the availability baseline
// of Refresh.
func (r *Registry) buildRegistration(c *Component) (*registration, *DefinitionError) {
	lim := &r.opts.Limits
	if !validComponentType(c.Type) {
		return nil, defErr(DefinitionInvalidID, "type", "component type must be dot-separated segments matching ^[a-z][a-z0-9-]*$, at most 128 long")
	}
	instance := cmp.Or(c.InstanceID, defaultInstanceID)
	if !validInstanceID(instance) {
		return nil, defErr(DefinitionInvalidID, "instanceId", "instance id must match ^[A-Za-z0-9_-]+$, at most 128 long")
	}
	if e := checkDescription(c.Description, lim.MaxComponentDescription); e != nil {
		return nil, e
	}
	reg := &registration{
		typ:         c.Type,
		instance:    instance,
		description: c.Description,
		priority:    c.Priority,
		internal:    maps.Clone(c.Internal),
	}
	if p := c.Parent; p != nil {
		reg.parent = *p
		reg.parent.InstanceID = cmp.Or(p.InstanceID, defaultInstanceID)
		if !validComponentType(reg.parent.Type) || !validInstanceID(reg.parent.InstanceID) {
			return nil, defErr(DefinitionInvalid, "parent", "parent needs a valid component type and instance id")
		}
	}
	var e *DefinitionError
	if reg.meta, e = freezeMeta(c.Meta, "meta", lim.MaxMetaBytes); e != nil {
		return nil, e
	}
	reg.metaMap = thawMeta(reg.meta)

	// Observations, then actions, each by name; procedures follow.
	reg.caps = make([]regCap, 0, len(c.Observations)+len(c.Actions)+len(c.Procedures))
	for name, cp := range c.Observations {
		reg.caps = append(reg.caps, regCap{name: name, def: cp.def})
	}
	reg.nObs = len(reg.caps)
	for name, cp := range c.Actions {
		reg.caps = append(reg.caps, regCap{name: name, def: cp.def})
	}
	reg.nView = len(reg.caps)
	byName := func(a, b regCap) int { return strings.Compare(a.name, b.name) }
	slices.SortFunc(reg.caps[:reg.nObs], byName)
	slices.SortFunc(reg.caps[reg.nObs:], byName)
	for i := range reg.caps {
		rc := &reg.caps[i]
		group, kind := "actions", KindAction
		if i < reg.nObs {
			group, kind = "observations", KindObservation
			if _, dup := c.Actions[rc.name]; dup {
				return nil, defErr(DefinitionDuplicateCapability, "actions."+rc.name, "the name is used by both an observation and an action")
			}
		}
		if e := r.checkViewCap(reg, rc, group, kind); e != nil {
			return nil, e
		}
	}
	if e := r.addProcedures(reg, c.Procedures); e != nil {
		return nil, e
	}
	r.assignIDs(reg)
	if e := r.lintSuffixes(reg); e != nil {
		return nil, e
	}
	// The baseline Refresh compares against: a When that is false now
	// flips to true on the Refresh after it turns true. (User code: no
	// lock is held.)
	for i := range reg.caps {
		reg.caps[i].whenOff = r.evalWhen(&reg.caps[i]) != whenTrue
	}
	return reg, nil
}

// assignIDs gives reg its registration id, which takes the next counter
// value, and its view capabilities their ids, all cut from one string
// ("reg_…view:T.a" + "view:T.b"…).
func (r *Registry) assignIDs(reg *registration) {
	var head [32]byte
	id := appendRegistrationID(head[:0], r.counter.Add(1), r.idKey)
	var b strings.Builder
	n := len(id)
	for _, rc := range reg.caps[:reg.nView] {
		n += len("view:") + len(reg.typ) + 1 + len(rc.name)
	}
	b.Grow(n)
	b.Write(id)
	for _, rc := range reg.caps[:reg.nView] {
		b.WriteString("view:")
		b.WriteString(reg.typ)
		b.WriteByte('.')
		b.WriteString(rc.name)
	}
	all := b.String()
	reg.id, all = all[:len(id)], all[len(id):]
	for i := range reg.caps[:reg.nView] {
		n := len("view:") + len(reg.typ) + 1 + len(reg.caps[i].name)
		reg.caps[i].id, all = all[:n], all[n:]
	}
}

// checkViewCap validates an observation or action of reg and freezes its
// id and meta.
func (r *Registry) checkViewCap(reg *registration, rc *regCap, group string, kind Kind) *DefinitionError {
	lim := &r.opts.Limits
	if !validCapabilityName(rc.name) {
		return defErr(DefinitionInvalidID, group+"."+rc.name, "capability name must match ^[a-z][A-Za-z0-9]*$")
	}
	if len("view:")+len(reg.typ)+1+len(rc.name) > MaxIDLength {
		return defErr(DefinitionInvalidID, group+"."+rc.name, fmt.Sprintf("capability id %q is longer than %d", viewID(reg.typ, rc.name), MaxIDLength))
	}
	d := rc.def
	if e := d.check(group, rc.name, kind, lim); e != nil {
		return e
	}
	if kind == KindAction {
		rc.group = reg.staticGroup(d)
	}
	if len(d.meta) > 0 {
		var e *DefinitionError
		if rc.meta, e = freezeMeta(d.meta, group+"."+rc.name+".meta", lim.MaxMetaBytes); e != nil {
			return e
		}
		rc.metaMap = thawMeta(rc.meta)
	}
	return nil
}

// addProcedures validates and binds the component's procedure references.
func (r *Registry) addProcedures(reg *registration, procs []Capability) *DefinitionError {
	if len(procs) == 0 {
		return nil
	}
	box := r.executor.Load()
	for i, pc := range procs {
		field := "procedures." + strconv.Itoa(i)
		d := pc.def
		if e := d.check("procedures", strconv.Itoa(i), KindProcedure, &r.opts.Limits); e != nil {
			return e
		}
		path := d.proc.path
		switch {
		case box == nil:
			return defErr(DefinitionPlaneViolation, field, "procedure references need a procedure executor; call SetProcedureExecutor first")
		case box.paths != nil && !slices.Contains(box.paths, path):
			return defErr(DefinitionPlaneViolation, field, fmt.Sprintf("the executor does not expose %q", path))
		}
		if slices.ContainsFunc(reg.caps[reg.nView:], func(rc regCap) bool { return rc.name == path }) {
			return defErr(DefinitionDuplicateCapability, field, fmt.Sprintf("procedure %q is referenced twice", path))
		}
		meta, e := freezeMeta(d.meta, field+".meta", r.opts.Limits.MaxMetaBytes)
		if e != nil {
			return e
		}
		if c := d.proc.context; c != nil && (!validComponentType(c.Type) || c.InstanceID != "" && !validInstanceID(c.InstanceID)) {
			return defErr(DefinitionInvalid, field+".context", "context needs a valid component type and instance id")
		}
		var owner *Parent
		if reg.nView > 0 { // a procedure-only registration has no context link
			owner = &Parent{Type: reg.typ, InstanceID: reg.instance}
		}
		reg.caps = append(reg.caps, regCap{id: "domain:" + path, name: path, def: d, meta: meta, metaMap: thawMeta(meta), bound: bindProcedure(d, owner), group: reg.staticGroup(d)})
	}
	return nil
}

// lintSuffixes reports view capabilities "view:T.n" whose suffix "T.n" is
// a procedure path of the executor (semantics §8.5).
func (r *Registry) lintSuffixes(reg *registration) *DefinitionError {
	box := r.executor.Load()
	if r.opts.SuffixCollisions == SuffixOff || box == nil || len(box.paths) == 0 {
		return nil
	}
	for i := range reg.nView {
		rc := &reg.caps[i]
		path := reg.typ + "." + rc.name
		if !slices.Contains(box.paths, path) {
			continue
		}
		if r.opts.SuffixCollisions == SuffixError {
			return defErr(DefinitionPlaneViolation, "", fmt.Sprintf("%s is confusable with the domain procedure %q", rc.id, path))
		}
		if r.opts.Environment.isDev() {
			r.opts.Logger.Warn("surface: view capability suffix collides with a domain procedure", "capabilityId", rc.id, "procedureId", "domain:"+path)
		}
		emit(r, CollisionSuspected{ViewCapabilityID: rc.id, DomainProcedureID: "domain:" + path})
		r.audit(AuditEvent{Type: AuditCollisionSuspected, CapabilityID: rc.id})
	}
	return nil
}

// thawMeta decodes a frozen meta record into a private map for policies.
func thawMeta(t JSONText) map[string]any {
	if t == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(t), &m); err != nil {
		return nil // frozen meta is always a JSON object
	}
	return m
}
