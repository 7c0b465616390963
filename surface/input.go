package surface

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/internal/schema"
)

// effective is the effective input of a call (phase 5), in the three
// forms the later phases use.
type effective struct {
	in    any    // the typed input handed to the handler: *In for actions, the canonical JSON for procedures
	value any    // its JSON value, for invoke policies and the confirmation summary
	text  []byte // its canonical JSON, which confirmations bind and audit records carry
}

// effectiveInput runs phase 5: the action's validated, decoded input, or
// the procedure's input merged with its live bound values. Observations
// take none (and ignore input that is not JSON).
func (r *Registry) effectiveInput(ctx context.Context, a *attempt) (effective, *Error) {
	switch kind := a.cap.def.kind; {
	case kind == KindObservation:
		return effective{}, nil
	case a.inputBad != "":
		return effective{}, invalidInput(Issue{Path: "", Message: a.inputBad})
	case kind == KindAction:
		return r.actionInput(a)
	}
	return r.procedureInput(ctx, a)
}

// actionInput validates the action input against its schema and decodes
// it into the handler's type. No input means null, or {} for an object
// schema.
func (r *Registry) actionInput(a *attempt) (effective, *Error) {
	d := a.cap.def
	raw := a.input
	if raw == nil {
		raw = []byte("null")
		if d.input.IsObject() {
			raw = []byte("{}")
		}
	}
	value, err := canonical.Decode(raw)
	if err != nil {
		return effective{}, invalidInput(Issue{Path: "", Message: msgInvalidJSON})
	}
	if issues := d.input.Validate(value); len(issues) > 0 {
		return effective{}, invalidInput(schemaIssues(issues)...)
	}
	// Decode from the canonical text of the validated value: it spells
	// numbers the way Go decoders accept (1 rather than 1.0).
	in, e := r.decode(a, raw)
	if e != nil {
		return effective{}, e
	}
	return effective{in: in, value: value, text: raw}, nil
}

// decode decodes the input into the handler's type, which may have an
// UnmarshalJSON of its own: a failure or a panic there is INVALID_INPUT.
func (r *Registry) decode(a *attempt, raw []byte) (in any, e *Error) {
	defer r.recoverAs(&e, badShape, "decoding the input", a.inv.CapabilityID)
	in, err := a.cap.def.decode(raw)
	if err != nil {
		return nil, badShape()
	}
	return in, nil
}

// badShape is the INVALID_INPUT of an input the handler's type cannot hold.
func badShape() *Error { return invalidInput(Issue{Path: "", Message: msgShape}) }

// procedureInput builds the effective input of a procedure call
// (semantics §15): the agent's object, no locked field, valid against the
// agent's schema; then the live bound values merged in and the whole
// validated against the full schema, all before any policy or
// confirmation sees it.
func (r *Registry) procedureInput(ctx context.Context, a *attempt) (effective, *Error) {
	b := a.cap.bound
	raw := a.input
	if raw == nil {
		raw = []byte("{}")
	}
	agent, err := canonical.Decode(raw)
	if err != nil {
		return effective{}, invalidInput(Issue{Path: "", Message: msgInvalidJSON})
	}
	obj, isObj := agent.(map[string]any)
	if !isObj {
		return effective{}, invalidInput(Issue{Path: "", Message: "expected object"})
	}
	if len(b.locked) > 0 {
		var sent []string
		for _, k := range orderedKeys(a.inv.Input) { // agent key order
			if slices.Contains(b.locked, k) && !slices.Contains(sent, k) {
				sent = append(sent, k)
			}
		}
		if len(sent) > 0 {
			return effective{}, NewError(CodeInvalidInput, "Some fields are bound to the UI and cannot be set; omit them.", map[string]any{"lockedFields": sent})
		}
	}
	if issues := b.reduced.Validate(obj); len(issues) > 0 {
		return effective{}, invalidInput(schemaIssues(issues)...)
	}
	if len(b.keys) > 0 {
		if err := r.mergeBound(ctx, a, obj); err != nil {
			r.opts.Logger.Warn("surface: procedure binding failed", "procedureId", a.inv.CapabilityID, "error", err)
			return effective{}, NewReasonError(CodePreconditionFailed, ReasonBindingFailed, "The UI state this operation is bound to is not usable right now; refresh and retry.")
		}
	}
	eff, err := canonical.Marshal(obj)
	if err != nil {
		return effective{}, invalidInput(Issue{Path: "", Message: msgInvalidJSON})
	}
	return effective{in: eff, value: obj, text: eff}, nil
}

// mergeBound reads the live bound values (Bind is user code: a panic, in
// it or in encoding a value it returned, is an error) and merges them into
// obj: each declared bound key takes its value unless it is overridable
// and the agent sent it; a value that is not there is skipped, and keys
// Bind returns that are not declared are ignored. The merged object must
// match the full input schema.
func (r *Registry) mergeBound(ctx context.Context, a *attempt, obj map[string]any) (err error) {
	defer recoverError(&err)
	d, b := a.cap.def, a.cap.bound
	vals, err := d.proc.bind(ctx)
	if err != nil {
		return err
	}
	if r.opts.Environment.isDev() {
		for k := range vals {
			if !slices.Contains(b.keys, k) {
				r.opts.Logger.Warn("surface: Bind returned a field its procedure does not declare in Bound; it is ignored", "procedureId", a.inv.CapabilityID, "field", k)
			}
		}
	}
	for _, k := range b.keys {
		v, present := vals[k]
		if !present {
			continue
		}
		if _, sent := obj[k]; sent && slices.Contains(b.overridable, k) {
			continue // the agent overrode it
		}
		jv, err := toJSONValue(v)
		if err != nil {
			return err
		}
		obj[k] = jv
	}
	if issues := d.input.Validate(obj); len(issues) > 0 {
		return fmt.Errorf("the merged input does not match the schema at %q: %s", issues[0].Path, issues[0].Message)
	}
	return nil
}

// toJSONValue converts a Go value to its decoded JSON form.
func toJSONValue(v any) (any, error) {
	b, err := canonical.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// orderedKeys returns the top-level keys of a JSON object in text order.
func orderedKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

// schemaIssues converts the validator's issues to agent-facing ones.
func schemaIssues(issues []schema.Issue) []Issue {
	out := make([]Issue, len(issues))
	for i, is := range issues {
		out[i] = Issue{Path: is.Path, Message: is.Message}
	}
	return out
}
