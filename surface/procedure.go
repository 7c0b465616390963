package surface

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/internal/schema"
)

// ProcedureDef defines a procedure reference: an existing domain operation
// (executed by the registry's [ProcedureExecutor], which re-checks
// authority on every call) made contextually available by a component,
// with parts of its input bound to live UI state. Build a [Capability]
// from it with [Procedure] and list it in Component.Procedures.
//
// The agent sees the procedure's input schema minus the locked bound
// fields; at invocation the bound values are read live, merged with the
// agent's input and validated against the full schema before any policy or
// confirmation sees them, so an approval binds exactly the values that
// execute.
type ProcedureDef[In, Out any] struct {
	// ID is the capability id, "domain:" + the procedure path
	// ("domain:devices.disable"), at most 128 long.
	ID string
	// Description is the stable, agent-visible description of the
	// operation; live text belongs in Describe.
	Description string
	// InputSchema and OutputSchema, when set, are raw JSON Schemas; else
	// they are inferred from In and Out. The input schema must be an
	// object when fields are bound.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Effect is EffectServerQuery, EffectServerMutation, EffectExternalSideEffect or
	// Destructive; view effects belong to actions (a PLANE_VIOLATION here).
	Effect Effect
	// RequiresApproval makes every call need the user's confirmation.
	RequiresApproval bool
	// Confirmation overrides the effect's default level (server-query
	// never, server-mutation optional, external-side-effect and destructive
	// required); a destructive procedure never goes below optional.
	Confirmation Confirmation
	// When, UnavailableReason and UnavailableReasonFunc give live
	// availability, as for actions.
	When                  func() bool
	UnavailableReason     string
	UnavailableReasonFunc func() string
	// Bound declares the input fields filled from live UI state (the
	// current selection, the open record): top-level properties of the
	// input schema, which must then be an object. The declaration is
	// static (the reference implementation learns the fields by calling
	// Bind at mount), so what the agent may set never depends on whether
	// live state was ready: a bound field not listed in Overridable is
	// locked, absent from the agent's schema and refused (INVALID_INPUT
	// with lockedFields) when an agent sends it, whatever Bind does.
	// Bound needs Bind.
	Bound []string
	// Overridable lists the bound fields the agent may set; they default
	// to the bound value. Each must be listed in Bound.
	Overridable []string
	// Bind returns the live values of the Bound fields. It runs on every
	// invocation, never at Register. A key it returns that Bound does not
	// declare is ignored; a declared key it leaves out is not filled (the
	// full input schema then decides). An error or a panic fails the call
	// PRECONDITION_FAILED (binding-failed) before any policy or
	// confirmation sees it and nothing executes; the cause is logged.
	// Bind needs Bound.
	Bind func(ctx context.Context) (map[string]any, error)
	// Describe returns a live contextual note ("3 devices selected"),
	// shown apart from the stable description.
	Describe func() string
	// Context links the reference to a component other than the one
	// registering it.
	Context *Parent
	// Policies apply to this reference, inside the registry's and the
	// component's.
	Policies []Policy
	// Meta is agent-visible metadata, frozen at registration.
	Meta map[string]any
	// Timeout bounds the executor call. Zero means Limits.ProcedureTimeout.
	Timeout time.Duration
	// Concurrency says how calls queue. Default: one at a time per
	// reference. A key function sees the effective input.
	Concurrency Concurrency[In]
	// Grants opts the reference into standing grants: a grant the host
	// made from a person's decision may then let a call skip the
	// question its confirmation would ask. Default none. A destructive or
	// external-side-effect reference must name the ceiling (MaxTTL and
	// MaxUses) to allow any.
	Grants GrantRule
}

// procDef holds what only procedure references have.
type procDef struct {
	path             string
	requiresApproval bool
	bind             func(ctx context.Context) (map[string]any, error)
	describe         func() string
	context          *Parent
	spec             *bindSpec
}

// Procedure builds a capability from a procedure reference definition.
// Problems are reported by [Registry.Register] as *DefinitionError.
func Procedure[In, Out any](def ProcedureDef[In, Out]) Capability {
	d := newCapDef(KindProcedure, def.Description, def.Meta, def.Policies, def.Timeout, def.When, def.UnavailableReason, def.UnavailableReasonFunc)
	d.effect, d.idempotent = def.Effect, def.Effect == EffectServerQuery
	d.grants = def.Grants
	d.proc = &procDef{
		requiresApproval: def.RequiresApproval,
		bind:             def.Bind,
		describe:         def.Describe,
	}
	if def.Context != nil {
		c := *def.Context
		d.proc.context = &c
	}
	d.confirmation, d.audit = procedureLevels(def.Effect, def.Confirmation, def.RequiresApproval)
	path, ok := strings.CutPrefix(def.ID, "domain:")
	switch {
	case !ok || path == "" || len(def.ID) > MaxIDLength:
		d.bad = defErr(DefinitionInvalid, "id", `a procedure id is "domain:" + a non-empty path, at most 128 long`)
	case !def.Confirmation.valid():
		d.bad = defErr(DefinitionInvalid, "confirmation", "confirmation must be never, optional or required")
	default:
		d.proc.path = path
		inType, outType := reflect.TypeFor[In](), reflect.TypeFor[Out]()
		if inType == noneType && def.InputSchema == nil {
			d.input = emptyObjectSchema()
		} else {
			d.input, d.bad = compileSchema(def.InputSchema, inType, "input")
		}
		if d.bad == nil && (outType != noneType || def.OutputSchema != nil) {
			d.output, d.bad = compileSchema(def.OutputSchema, outType, "output")
			d.outputTyped = false // executor output is foreign JSON: always checked
		}
		if d.bad == nil {
			d.proc.spec, d.bad = newBindSpec(d.input, def.Bound, def.Overridable, def.Bind != nil)
		}
		if d.bad == nil {
			d.conc, d.bad = compileConcurrency(def.Concurrency, ConcurrencyCapability, decodeEffective[In])
		}
	}
	return Capability{d}
}

// procedureLevels returns the confirmation and audit levels of a procedure
// (semantics §2 with DESIGN decision 4): the effect's default unless
// declared, a destructive procedure never below optional, RequiresApproval
// forcing required.
func procedureLevels(effect Effect, declared Confirmation, requiresApproval bool) (Confirmation, AuditLevel) {
	level, audit := ConfirmNever, AuditLevelMetadata
	switch effect {
	case EffectServerMutation:
		level = ConfirmOptional
	case EffectExternalSideEffect, EffectDestructive:
		level, audit = ConfirmRequired, AuditLevelFull
	}
	if declared != "" {
		level = declared
	}
	if effect == EffectDestructive && level == ConfirmNever {
		level = ConfirmOptional
	}
	if requiresApproval {
		level = ConfirmRequired
	}
	return level, audit
}

// bindSpec is the declared binding of a procedure reference, frozen when
// the definition is built: which keys are bound, which of them are
// locked, and the schema the agent sees. It never depends on what Bind
// returns.
type bindSpec struct {
	keys        []string // declared order
	locked      []string // keys minus overridable, declared order
	overridable []string
	reduced     *schema.Schema
	fields      []BoundField
}

// binding is a procedure reference in one registration: its declared
// binding and the component it is linked to.
type binding struct {
	*bindSpec
	context *Parent // nil for a procedure-only registration without a declared Context
}

// instance is the instance id a call's InstanceID selects the reference
// by: its context's, "" without one.
func (b *binding) instance() string {
	if b.context == nil {
		return ""
	}
	return b.context.InstanceID
}

// contextRef returns a copy of the reference's context link, or nil.
func (b *binding) contextRef() *Parent {
	if b.context == nil {
		return nil
	}
	c := *b.context
	return &c
}

// overridableNote is appended to the description of overridable bound
// fields in the agent's schema.
const overridableNote = "Defaults to the value selected in the UI when omitted."

// newBindSpec checks the declared bound keys against the input schema and
// builds the agent's (reduced) schema: locked keys deleted, overridable
// ones annotated, no bound key required (semantics §15).
func newBindSpec(input *schema.Schema, bound, overridable []string, hasBind bool) (*bindSpec, *DefinitionError) {
	sp := &bindSpec{keys: slices.Clone(bound), overridable: slices.Clone(overridable), reduced: input, fields: []BoundField{}}
	switch {
	case len(bound) > 0 && !hasBind:
		return nil, defErr(DefinitionInvalid, "bind", "bound fields need a Bind function for their live values")
	case len(bound) == 0 && hasBind:
		return nil, defErr(DefinitionInvalid, "bound", "declare the fields Bind fills in Bound")
	}
	for i, k := range bound {
		if k == "" || slices.Contains(bound[:i], k) {
			return nil, defErr(DefinitionInvalid, "bound", fmt.Sprintf("bound field %q is empty or listed twice", k))
		}
	}
	for _, o := range overridable {
		if !slices.Contains(bound, o) {
			return nil, defErr(DefinitionInvalid, "overridable", fmt.Sprintf("%q is not a bound field", o))
		}
	}
	if len(bound) == 0 {
		return sp, nil
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(input.JSON()), &doc); err != nil || doc["type"] != "object" {
		return nil, defErr(DefinitionInvalid, "input", "bound fields need an object input schema")
	}
	props, _ := doc["properties"].(map[string]any)
	for _, k := range bound {
		if _, ok := props[k]; !ok {
			return nil, defErr(DefinitionInvalid, "bound", fmt.Sprintf("bound field %q is not a property of the input schema", k))
		}
		locked := !slices.Contains(overridable, k)
		if locked {
			sp.locked = append(sp.locked, k)
		}
		sp.fields = append(sp.fields, BoundField{Path: k, Locked: locked, Source: "ui-state"})
	}
	// The surgery keeps the author's key order (semantics §10.8).
	reduced, err := schema.Reduce(input, sp.locked, overridable, overridableNote, buildLimits)
	sp.reduced = reduced
	if err != nil {
		return nil, &DefinitionError{Code: DefinitionUnsupportedSchema, Field: "input", Message: "the reduced input schema is invalid: " + err.Error(), Err: err}
	}
	return sp, nil
}

// bindProcedure links a reference to its component: the declared
// Context, else the owner, except in a procedure-only registration
// (semantics §8.1), which has no context link unless it declares one.
func bindProcedure(d *capDef, owner *Parent) *binding {
	b := &binding{bindSpec: d.proc.spec, context: owner}
	if d.proc.context != nil {
		c := *d.proc.context
		if c.InstanceID == "" {
			c.InstanceID = defaultInstanceID
		}
		b.context = &c
	}
	return b
}

// SetProcedureExecutor installs the executor of domain procedures (nil
// removes it: calls then fail EXECUTION_FAILED transport). Procedure
// references can only be registered while an executor is installed, and
// only for paths in its manifest.
func (r *Registry) SetProcedureExecutor(e ProcedureExecutor) {
	if e == nil {
		r.executor.Store(nil)
		return
	}
	r.executor.Store(&executorBox{e: e, paths: e.Paths()})
}

// executorBox pins an executor and its manifest.
type executorBox struct {
	e     ProcedureExecutor
	paths []string
}

// FuncExecutor is an in-process ProcedureExecutor: procedure paths mapped
// to Go functions, for domain services that live in the same process. Add
// functions with [AddFunc]. It is safe for concurrent use.
type FuncExecutor struct {
	mu    sync.RWMutex
	funcs map[string]func(ctx context.Context, call *ProcedureCall) (json.RawMessage, error)
}

// NewFuncExecutor returns an empty in-process executor.
func NewFuncExecutor() *FuncExecutor {
	return &FuncExecutor{funcs: map[string]func(context.Context, *ProcedureCall) (json.RawMessage, error){}}
}

// AddFunc adds the domain function for path to x: the effective input is
// decoded into In and the output encoded as JSON. The function is the
// domain side: it must check the caller's authority itself (from
// call.Host), never trust the agent or the evidence.
func AddFunc[In, Out any](x *FuncExecutor, path string, fn func(ctx context.Context, call *ProcedureCall, in In) (Out, error)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.funcs[path] = func(ctx context.Context, call *ProcedureCall) (json.RawMessage, error) {
		var in In
		if err := json.Unmarshal(call.Input, &in); err != nil {
			return nil, badShape()
		}
		out, err := fn(ctx, call, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

// Paths implements ProcedureExecutor.
func (x *FuncExecutor) Paths() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Sorted(maps.Keys(x.funcs))
}

// Execute implements ProcedureExecutor.
func (x *FuncExecutor) Execute(ctx context.Context, call *ProcedureCall) (json.RawMessage, error) {
	x.mu.RLock()
	fn := x.funcs[call.Path]
	x.mu.RUnlock()
	if fn == nil {
		return nil, fmt.Errorf("surface: no domain function for %q", call.Path)
	}
	return fn(ctx, call)
}
