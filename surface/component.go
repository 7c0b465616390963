package surface

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
	n := len(s) // never fewer UTF-8 bytes than UTF-16 units: count those only when over
	if n > max {
		n = jsLen(s)
	}
	return describeProblem(isBlank(s), n, max)
}

// isBlank reports whether s is empty or white space, as
// strings.TrimSpace(s) == "" does, deciding at the first byte for the
// usual text.
func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ', c >= '\t' && c <= '\r':
		case c < utf8.RuneSelf:
			return false
		default:
			return strings.TrimSpace(s[i:]) == ""
		}
	}
	return true
}

func describeProblem(blank bool, n, max int) *DefinitionError {
	if blank {
		return defErr(InvalidDefinition, "description", "a non-empty description is required")
	}
	if n > max {
		return defErr(LimitExceeded, "description", fmt.Sprintf("description is %d characters, more than the limit of %d", n, max))
	}
	return nil
}

// buildRegistration validates c and freezes its structure. The only user
// code it runs is each procedure's Bind, once, to learn the bound keys.
func (r *Registry) buildRegistration(c *Component) (*registration, *DefinitionError) {
	lim := &r.limits
	if !ValidComponentType(c.Type) {
		return nil, defErr(InvalidID, "type", "component type must be dot-separated segments matching ^[a-z][a-z0-9-]*$, at most 128 long")
	}
	instance := c.InstanceID
	if instance == "" {
		instance = DefaultInstanceID
	}
	if !ValidInstanceID(instance) {
		return nil, defErr(InvalidID, "instanceId", "instance id must match ^[A-Za-z0-9_-]+$, at most 128 long")
	}
	if e := checkDescription(c.Description, lim.MaxComponentDescription); e != nil {
		return nil, e
	}
	var ext regExtras
	if p := c.Parent; p != nil {
		ext.parent = *p
		if ext.parent.InstanceID == "" {
			ext.parent.InstanceID = DefaultInstanceID
		}
		if !ValidComponentType(ext.parent.Type) || !ValidInstanceID(ext.parent.InstanceID) {
			return nil, defErr(InvalidDefinition, "parent", "parent needs a valid component type and instance id")
		}
	}
	var e *DefinitionError
	if ext.meta, e = freezeMeta(c.Meta, "meta", lim.MaxMetaBytes); e != nil {
		return nil, e
	}
	reg := &registration{
		typ:         c.Type,
		instance:    instance,
		description: c.Description,
		priority:    c.Priority,
		ext:         &noExtras,
	}
	if c.Parent != nil || ext.meta != "" || c.Internal != nil {
		ext.internal = maps.Clone(c.Internal)
		ext.metaMap = thawMeta(ext.meta)
		reg.ext = new(ext) // a copy: ext itself stays on the stack
	}

	var buf [8]namedCap // both lists, for the usual small components
	obs := sortedCaps(c.Observations, buf[:0])
	acts := sortedCaps(c.Actions, obs[len(obs):len(obs)])
	reg.caps = make([]regCap, 0, len(obs)+len(acts)+len(c.Procedures))
	add := func(group string, nc namedCap, kind capKind) *DefinitionError {
		name, d := nc.name, nc.c.def
		if !d.validName(name) {
			return defErr(InvalidID, group+"."+name, "capability name must match ^[a-z][A-Za-z0-9]*$")
		}
		id := ViewID(reg.typ, name)
		if len(id) > MaxIDLength {
			return defErr(InvalidID, group+"."+name, fmt.Sprintf("capability id %q is longer than %d", id, MaxIDLength))
		}
		if e := d.check(group, name, kind, lim); e != nil {
			return e
		}
		if len(d.meta) == 0 {
			reg.caps = append(reg.caps, regCap{id: id, name: name, def: d, x: &noCapExtras})
			return nil
		}
		meta, e := freezeMeta(d.meta, group+"."+name+".meta", lim.MaxMetaBytes)
		if e != nil {
			return e
		}
		reg.caps = append(reg.caps, regCap{id: id, name: name, def: d, x: &capExtras{meta: meta, metaMap: thawMeta(meta)}})
		return nil
	}
	j := 0 // both lists are sorted: walk acts alongside to find a shared name
	for _, nc := range obs {
		for j < len(acts) && acts[j].name < nc.name {
			j++
		}
		if j < len(acts) && acts[j].name == nc.name {
			return nil, defErr(DuplicateCapability, "actions."+nc.name, "the name is used by both an observation and an action")
		}
		if e := add("observations", nc, kindObservation); e != nil {
			return nil, e
		}
	}
	reg.nObs = len(reg.caps)
	for _, nc := range acts {
		if e := add("actions", nc, kindAction); e != nil {
			return nil, e
		}
	}
	reg.nView = len(reg.caps)
	if e := r.addProcedures(reg, c.Procedures); e != nil {
		return nil, e
	}
	reg.id = string(appendRegistrationID(nil, r.counter.Add(1), r.idKey))
	if e := r.lintSuffixes(reg); e != nil {
		return nil, e
	}
	return reg, nil
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
		if e := d.check("procedures", strconv.Itoa(i), kindProcedure, &r.limits); e != nil {
			return e
		}
		path := d.proc.path
		switch {
		case box == nil:
			return defErr(PlaneViolation, field, "procedure references need a procedure executor; call SetProcedureExecutor first")
		case box.paths != nil && !slices.Contains(box.paths, path):
			return defErr(PlaneViolation, field, fmt.Sprintf("the executor does not expose %q", path))
		}
		for k := reg.nView; k < len(reg.caps); k++ {
			if reg.caps[k].name == path {
				return defErr(DuplicateCapability, field, fmt.Sprintf("procedure %q is referenced twice", path))
			}
		}
		var meta JSONText
		if len(d.meta) > 0 {
			var e *DefinitionError
			if meta, e = freezeMeta(d.meta, field+".meta", r.limits.MaxMetaBytes); e != nil {
				return e
			}
		}
		b, e := bindProcedure(d, Parent{Type: reg.typ, InstanceID: reg.instance}, field, &r.limits, r.log)
		if e != nil {
			return e
		}
		id := "domain:" + path
		reg.caps = append(reg.caps, regCap{id: id, name: path, def: d, x: &capExtras{meta: meta, metaMap: thawMeta(meta), bound: b}})
	}
	return nil
}

// lintSuffixes reports view capabilities "view:T.n" whose suffix "T.n" is
// a procedure path of the executor (semantics §8.5).
func (r *Registry) lintSuffixes(reg *registration) *DefinitionError {
	box := r.executor.Load()
	if r.suffix == SuffixOff || box == nil || len(box.paths) == 0 {
		return nil
	}
	for i := range reg.nView {
		rc := &reg.caps[i]
		path := reg.typ + "." + rc.name
		if !slices.Contains(box.paths, path) {
			continue
		}
		if r.suffix == SuffixError {
			return defErr(PlaneViolation, "", fmt.Sprintf("%s is confusable with the domain procedure %q", rc.id, path))
		}
		if r.env.IsDev() {
			r.log.Warn("surface: view capability suffix collides with a domain procedure", "capabilityId", rc.id, "procedureId", "domain:"+path)
		}
		emit(r, CollisionSuspected{ViewCapabilityID: rc.id, DomainProcedureID: "domain:" + path})
		r.audit(AuditEvent{Type: AuditCollisionSuspected, CapabilityID: rc.id})
	}
	return nil
}

// namedCap is a capability with its name in the component's map.
type namedCap struct {
	name string
	c    Capability
}

// sortedCaps appends the entries of m to buf, sorted by name.
func sortedCaps(m map[string]Capability, buf []namedCap) []namedCap {
	if len(m) == 0 {
		return buf
	}
	n := len(buf) + len(m)
	for k, c := range m {
		buf = append(buf, namedCap{k, c})
		if len(buf) == n { // all in: skip the iterator's search for more
			break
		}
	}
	if len(buf) > 1 {
		slices.SortFunc(buf, func(a, b namedCap) int { return strings.Compare(a.name, b.name) })
	}
	return buf
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
