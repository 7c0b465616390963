package surface

import (
	"cmp"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/internal/schema"
)

// Call carries the identity of one invocation to a handler. Handlers must
// not retain it after they return.
type Call struct {
	// CapabilityID is the id of the capability being called.
	CapabilityID string
	// RegistrationID is the registration that owns the capability.
	RegistrationID string
	// InvocationID is the idempotency key of the invocation.
	InvocationID string
	// Consumer is who called.
	Consumer Consumer
	// Host is the host context from [Options.Context], read once per
	// invocation. Treat it as read-only.
	Host map[string]any
	// Confirmation is the approved evidence this invocation carries, or nil.
	Confirmation *Evidence
	// GrantID is the standing grant that let this invocation skip the
	// question its confirmation would ask (see [Grants]), or "".
	GrantID string
}

// Evidence is an approved confirmation presented with an invocation.
type Evidence struct {
	// ID is the confirmation id.
	ID string
	// ApprovedAt is when the user approved.
	ApprovedAt time.Time
}

// ObservationDef defines an observation: a side-effect-free read of live
// state whose result has type Out. Build a [Capability] from it with
// [Observation].
type ObservationDef[Out any] struct {
	// Description is agent-visible, non-empty, at most
	// Limits.MaxCapabilityDescription UTF-16 code units.
	Description string
	// OutputSchema, when set, is the raw JSON Schema of the output; it
	// must fit the supported subset. When nil the schema is inferred from
	// Out (json tags; descriptions from a `jsonschema` struct tag).
	OutputSchema json.RawMessage
	// Read returns the current state. It must not change anything. It is
	// called with a context that ends on timeout, cancellation or unmount.
	Read func(ctx context.Context, call *Call) (Out, error)
	// When, if set, is the availability predicate, evaluated at snapshot
	// and at invocation. It must be cheap, synchronous and must not call
	// back into the registry; a panic counts as unavailable ("when-error").
	When func() bool
	// UnavailableReason explains to the agent why the capability is
	// unavailable when When returns false. Default "Currently unavailable".
	UnavailableReason string
	// UnavailableReasonFunc, if set, computes the reason live and takes
	// precedence over UnavailableReason.
	UnavailableReasonFunc func() string
	// Meta is agent-visible metadata: a JSON record of at most
	// Limits.MaxMetaBytes bytes, frozen at registration.
	Meta map[string]any
	// Policies apply to this capability, inside the registry's and the
	// component's.
	Policies []Policy
	// Timeout bounds Read. Zero means Limits.ObservationTimeout.
	Timeout time.Duration
}

// ActionDef defines an action: a change of view or session state
// (effect [EffectLocalState] or [EffectNavigation]) taking input In and returning Out.
// Use [None] for no input or no output. Build a [Capability] from it with
// [Action].
type ActionDef[In, Out any] struct {
	// Description is agent-visible, non-empty, at most
	// Limits.MaxCapabilityDescription UTF-16 code units.
	Description string
	// InputSchema, when set, is the raw JSON Schema of the input; else it
	// is inferred from In. A value that validates must decode into In.
	InputSchema json.RawMessage
	// OutputSchema, when set, is the raw JSON Schema of the output; else it
	// is inferred from Out (none for [None]).
	OutputSchema json.RawMessage
	// Effect must be EffectLocalState or Navigation; server effects belong to
	// procedure references (a PLANE_VIOLATION here).
	Effect Effect
	// Idempotent declares that repeating the action has no further effect.
	// Default false.
	Idempotent bool
	// Irreversible declares that the action cannot be undone. Default
	// false (reversible).
	Irreversible bool
	// Confirmation is the declared confirmation level. Default never.
	Confirmation Confirmation
	// Audit is the audit level. Default metadata.
	Audit AuditLevel
	// When, if set, is the availability predicate (see ObservationDef.When).
	When func() bool
	// UnavailableReason explains why the action is unavailable.
	UnavailableReason string
	// UnavailableReasonFunc computes the reason live; it takes precedence.
	UnavailableReasonFunc func() string
	// Precondition, if set, checks the validated input against live state
	// before execution; a non-nil error fails the call with
	// PRECONDITION_FAILED.
	Precondition func(ctx context.Context, call *Call, in In) error
	// Execute performs the action. Its context ends on timeout,
	// cancellation or unmount.
	Execute func(ctx context.Context, call *Call, in In) (Out, error)
	// Meta is agent-visible metadata, frozen at registration.
	Meta map[string]any
	// Policies apply to this capability, inside the registry's and the
	// component's.
	Policies []Policy
	// Timeout bounds Execute. Zero means Limits.ActionTimeout.
	Timeout time.Duration
	// Concurrency says how calls queue. Default: one at a time per
	// component instance, shared with the instance's other actions.
	Concurrency Concurrency[In]
	// Grants opts the action into standing grants: a grant the host
	// made from a person's decision may then let a call skip the
	// question its confirmation would ask. Default none.
	Grants GrantRule
}

// Capability is one observation or action, built by [Observation] or
// [Action] and placed in a [Component]. It is immutable and may be shared
// by several components. The zero Capability is invalid.
type Capability struct{ def *capDef }

// capDef is the untyped form every typed definition compiles to.
type capDef struct {
	kind         Kind
	description  string
	effect       Effect
	idempotent   bool
	reversible   bool
	confirmation Confirmation
	audit        AuditLevel
	input        *schema.Schema // nil for observations
	output       *schema.Schema // nil when the output is None
	outputTyped  bool           // output inferred from the Go type: whatever it marshals to validates
	bad          *DefinitionError
	proc         *procDef    // procedure references only
	conc         concurrency // actions and procedure references
	meta         map[string]any
	policies     []Policy
	timeout      time.Duration
	grants       GrantRule

	when     func() bool
	reason   string
	reasonFn func() string

	read         func(ctx context.Context, call *Call) (any, error)
	decode       func(raw []byte) (any, error)
	precondition func(ctx context.Context, call *Call, in any) error
	execute      func(ctx context.Context, call *Call, in any) (any, error)
}

var noneType = reflect.TypeFor[None]()

// emptyObjectSchema is the input schema of an action taking None.
var emptyObjectSchema = sync.OnceValue(func() *schema.Schema {
	s, err := schema.Parse([]byte(`{"type":"object","properties":{},"additionalProperties":false}`))
	if err != nil {
		panic("surface: empty object schema: " + err.Error())
	}
	return s
})

// buildLimits admit any schema the hard caps allow; each registry checks
// its own Limits at Register.
var buildLimits = schema.Limits{MaxBytes: schema.HardMaxBytes, MaxDepth: schema.HardMaxDepth}

// compileSchema returns the schema of a typed definition: the raw one when
// given, else the one inferred from t. Inferred output schemas describe
// what the type marshals to (nil slices and maps are null); inferred input
// schemas what decodes into it.
func compileSchema(raw json.RawMessage, t reflect.Type, field string) (*schema.Schema, *DefinitionError) {
	var (
		s   *schema.Schema
		err error
	)
	switch {
	case raw != nil:
		s, err = schema.ParseLimits(raw, buildLimits)
	case field == "output":
		s, err = schema.InferOutput(t, buildLimits)
	default:
		s, err = schema.InferLimits(t, buildLimits)
	}
	if err != nil {
		return nil, &DefinitionError{Code: DefinitionUnsupportedSchema, Field: field, Message: err.Error(), Err: err}
	}
	return s, nil
}

// Observation builds a capability from an observation definition. Schema
// problems are reported by [Registry.Register] as *DefinitionError.
func Observation[Out any](def ObservationDef[Out]) Capability {
	d := newCapDef(KindObservation, def.Description, def.Meta, def.Policies, def.Timeout, def.When, def.UnavailableReason, def.UnavailableReasonFunc)
	d.effect, d.idempotent, d.confirmation, d.audit = EffectRead, true, ConfirmNever, AuditLevelNone
	outType := reflect.TypeFor[Out]()
	switch {
	case def.Read == nil:
		d.bad = defErr(DefinitionInvalid, "read", "an observation needs a Read function")
	case outType == noneType && def.OutputSchema == nil:
		d.bad = defErr(DefinitionInvalid, "output", "an observation must return a value, not None")
	default:
		d.output, d.bad = compileSchema(def.OutputSchema, outType, "output")
		d.outputTyped = def.OutputSchema == nil
	}
	if read := def.Read; read != nil {
		d.read = func(ctx context.Context, call *Call) (any, error) { return read(ctx, call) }
	}
	return Capability{d}
}

// Action builds a capability from an action definition. Schema and field
// problems are reported by [Registry.Register] as *DefinitionError.
func Action[In, Out any](def ActionDef[In, Out]) Capability {
	d := newCapDef(KindAction, def.Description, def.Meta, def.Policies, def.Timeout, def.When, def.UnavailableReason, def.UnavailableReasonFunc)
	d.effect, d.idempotent, d.reversible = def.Effect, def.Idempotent, !def.Irreversible
	d.confirmation, d.audit = cmp.Or(def.Confirmation, ConfirmNever), cmp.Or(def.Audit, AuditLevelMetadata)
	d.grants = def.Grants
	inType, outType := reflect.TypeFor[In](), reflect.TypeFor[Out]()
	switch {
	case def.Execute == nil:
		d.bad = defErr(DefinitionInvalid, "execute", "an action needs an Execute function")
	case inType == noneType && def.InputSchema == nil:
		d.input = emptyObjectSchema()
	default:
		d.input, d.bad = compileSchema(def.InputSchema, inType, "input")
	}
	if d.bad == nil && (outType != noneType || def.OutputSchema != nil) {
		d.output, d.bad = compileSchema(def.OutputSchema, outType, "output")
		d.outputTyped = def.OutputSchema == nil
	}
	// The untyped input is a *In; nil means the zero In.
	d.decode = func(raw []byte) (any, error) {
		if inType == noneType {
			return nil, nil
		}
		in := new(In)
		return in, json.Unmarshal(raw, in)
	}
	typed := func(in any) In {
		if p, ok := in.(*In); ok {
			return *p
		}
		var zero In
		return zero
	}
	if d.bad == nil {
		d.conc, d.bad = compileConcurrency(def.Concurrency, ConcurrencyInstance, func(in any) (In, error) { return typed(in), nil })
	}
	if pre := def.Precondition; pre != nil {
		d.precondition = func(ctx context.Context, call *Call, in any) error {
			return pre(ctx, call, typed(in))
		}
	}
	if exec := def.Execute; exec != nil {
		d.execute = func(ctx context.Context, call *Call, in any) (any, error) {
			out, err := exec(ctx, call, typed(in))
			if outType == noneType {
				return nil, err
			}
			return out, err
		}
	}
	return Capability{d}
}

// newCapDef holds what every kind of capability definition has in common.
func newCapDef(kind Kind, description string, meta map[string]any, policies []Policy, timeout time.Duration,
	when func() bool, reason string, reasonFn func() string) *capDef {
	return &capDef{
		kind: kind, description: description, meta: meta, policies: slices.Clone(policies),
		timeout: timeout, when: when, reason: reason, reasonFn: reasonFn,
	}
}

// check reports a structural defect of the capability under the
// registry's limits. group and name place it in the component
// ("actions", "selectRows").
func (d *capDef) check(group, name string, want Kind, lim *Limits) *DefinitionError {
	at := func(e *DefinitionError) *DefinitionError {
		c := *e
		c.Field = group + "." + name
		if e.Field != "" {
			c.Field += "." + e.Field
		}
		return &c
	}
	if d == nil {
		return at(defErr(DefinitionInvalid, "", "not built by surface.Observation or surface.Action"))
	}
	if d.kind != want {
		return at(defErr(DefinitionInvalid, "", "a "+string(d.kind)+" listed among "+string(want)+"s"))
	}
	if e := d.checkLimits(lim); e != nil {
		return at(e)
	}
	return nil
}

// checkLimits is check's part that depends on the limits.
func (d *capDef) checkLimits(lim *Limits) *DefinitionError {
	if d.bad != nil {
		return d.bad
	}
	if e := checkDescription(d.description, lim.MaxCapabilityDescription); e != nil {
		return e
	}
	if d.kind == KindProcedure && !d.effect.isServer() {
		if d.effect.isView() {
			return defErr(DefinitionPlaneViolation, "effect", "effect "+string(d.effect)+" belongs to actions; procedure references have server effects")
		}
		return defErr(DefinitionInvalid, "effect", "effect must be server-query, server-mutation, external-side-effect or destructive")
	}
	if d.kind == KindAction {
		switch {
		case d.effect.isServer():
			return defErr(DefinitionPlaneViolation, "effect", "effect "+string(d.effect)+" belongs to procedure references; actions are local-state or navigation")
		case !d.effect.isView():
			return defErr(DefinitionInvalid, "effect", "effect must be local-state or navigation")
		case !d.confirmation.valid():
			return defErr(DefinitionInvalid, "confirmation", "confirmation must be never, optional or required")
		case !d.audit.valid():
			return defErr(DefinitionInvalid, "audit", "audit must be none, metadata or full")
		}
	}
	if d.timeout < 0 {
		return defErr(DefinitionInvalid, "timeout", "timeout must not be negative")
	}
	if e := d.grants.check(d.effect); e != nil {
		return e
	}
	var reduced *schema.Schema // the agent's schema of a procedure with bound fields
	if d.proc != nil && d.proc.spec.reduced != d.input {
		reduced = d.proc.spec.reduced
	}
	for _, s := range []struct {
		s     *schema.Schema
		field string
	}{{d.input, "input"}, {d.output, "output"}, {reduced, "input"}} {
		if s.s == nil {
			continue
		}
		if err := s.s.CheckLimits(lim.MaxSchemaBytes, lim.MaxSchemaDepth); err != nil {
			return &DefinitionError{Code: DefinitionUnsupportedSchema, Field: s.field, Message: err.Error(), Err: err}
		}
	}
	return nil
}
