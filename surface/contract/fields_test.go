package contract_test

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// Why a descriptor field has no field of its own in a contract.
const (
	live  = "(live state: left out)"
	inID  = "(the capability id holds it)"
	own   = "(each listed capability is recorded on its own)"
	fixed = `(always "ui-state")`
)

// descriptorFields says, for every exported field of the snapshot's
// descriptors, which field of the contract records it (by JSON name), or
// why none does. A field added to a descriptor fails
// TestDescriptorFields until it is placed here: recorded, which the
// test then checks value by value, or declared live state. The fields of
// [surface.Declaration] that a descriptor embeds need no entry: each is
// a fact, recorded under its JSON name (contract.Facts), and checked
// value by value like the others.
var descriptorFields = map[reflect.Type]map[string]string{
	reflect.TypeFor[surface.ComponentDescriptor](): {
		"Type": "type", "InstanceID": "instanceId", "RegistrationID": live, "Description": "description",
		"Parent": "parent", "Meta": "meta", "Observations": own, "Actions": own,
	},
	reflect.TypeFor[surface.ObservationDescriptor](): {
		"CapabilityID": "capabilityId", "Name": inID, "Description": "description", "OutputSchema": "outputSchema",
		"Available": live, "UnavailableReason": live, "Meta": "meta",
	},
	reflect.TypeFor[surface.ActionDescriptor](): {
		"CapabilityID": "capabilityId", "Name": inID, "Description": "description",
		"InputSchema": "inputSchema", "OutputSchema": "outputSchema", "Available": live, "UnavailableReason": live, "Meta": "meta",
	},
	reflect.TypeFor[surface.ProcedureDescriptor](): {
		"ProcedureID": "capabilityId", "Description": "description", "ContextualNote": live,
		"InputSchema": "inputSchema", "OutputSchema": "outputSchema", "Effect": "effect", "Confirmation": "confirmation",
		"Available": live, "UnavailableReason": live, "BoundFields": "boundFields", "RegistrationID": live,
		"Context": "context", "Meta": "meta",
	},
	reflect.TypeFor[surface.BoundField](): {"Path": "path", "Locked": "locked", "Source": fixed},
}

// recordedIn is the contract type that records each descriptor type.
var recordedIn = map[reflect.Type]reflect.Type{
	reflect.TypeFor[surface.ComponentDescriptor]():   reflect.TypeFor[contract.Component](),
	reflect.TypeFor[surface.ObservationDescriptor](): reflect.TypeFor[contract.Capability](),
	reflect.TypeFor[surface.ActionDescriptor]():      reflect.TypeFor[contract.Capability](),
	reflect.TypeFor[surface.ProcedureDescriptor]():   reflect.TypeFor[contract.Capability](),
	reflect.TypeFor[surface.BoundField]():            reflect.TypeFor[contract.BoundField](),
}

// jsonNames maps the exported fields of struct type t to their JSON
// names, those of an embedded struct (surface.Declaration) as its own, as
// encoding/json does. A field encoding/json leaves out has none.
func jsonNames(t reflect.Type) map[string]string {
	out := map[string]string{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		switch {
		case tag == "-":
			continue
		case f.Anonymous && f.Type.Kind() == reflect.Struct && tag == "":
			maps.Copy(out, jsonNames(f.Type))
			continue
		case !f.IsExported():
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[f.Name] = name
	}
	return out
}

// declaredFacts maps the fields of surface.Declaration to their JSON names: the
// facts a contract records by name.
var declaredFacts = jsonNames(reflect.TypeFor[surface.Declaration]())

// fieldsTable is descriptorFields' entry for typ, with the facts it embeds.
func fieldsTable(typ reflect.Type) map[string]string {
	out := maps.Clone(descriptorFields[typ])
	if f, ok := typ.FieldByName("Declaration"); ok && f.Anonymous {
		maps.Copy(out, declaredFacts)
	}
	return out
}

// Every exported field of a snapshot descriptor is either recorded by a
// field of the contract or declared left out (live state), so that no
// field can escape the drift gate that exists to catch drift; the table
// names no field that does not exist, and live state has no field in a
// contract.
func TestDescriptorFields(t *testing.T) {
	if len(declaredFacts) == 0 {
		t.Fatal("surface.Declaration has no fields")
	}
	for typ := range descriptorFields {
		table := fieldsTable(typ)
		descNames := jsonNames(typ)
		into := jsonNames(recordedIn[typ])
		contractNames := map[string]bool{}
		for _, n := range into {
			contractNames[n] = true
		}
		if recordedIn[typ] == reflect.TypeFor[contract.Capability]() {
			for _, n := range declaredFacts { // Capability.Declared records them by name
				contractNames[n] = true
			}
		}
		for field, json := range descNames {
			where, ok := table[field]
			switch {
			case !ok:
				t.Errorf("%s.%s: not in descriptorFields: record it in the contract (a field of %s with JSON name %q, and a rule row in diff.go) or declare it live state",
					typ.Name(), field, recordedIn[typ].Name(), json)
			case strings.HasPrefix(where, "("):
				if where == live && contractNames[json] {
					t.Errorf("%s.%s is live state, but the contract has a field %q", typ.Name(), field, json)
				}
			case !contractNames[where]:
				t.Errorf("%s.%s: the contract's %s has no field %q", typ.Name(), field, recordedIn[typ].Name(), where)
			case where != json && !(field == "ProcedureID" && where == "capabilityId"):
				t.Errorf("%s.%s: recorded as %q, but its wire name is %q (a contract records a field under its wire name)", typ.Name(), field, where, json)
			}
		}
		for field := range table {
			if _, ok := descNames[field]; !ok {
				t.Errorf("descriptorFields lists %s.%s, which does not exist", typ.Name(), field)
			}
		}
	}
}

// fieldsRegistry has one capability of each kind with every descriptor
// field set: a component with a parent and meta, an observation with
// meta, an action with an output, a declared level and meta, and a
// procedure reference with a context, a bound field, an output and meta.
func fieldsRegistry(t *testing.T) *surface.Registry {
	reg := surfacetest.NewRegistry(t, nil)
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "shop.refund", func(context.Context, *surface.ProcedureCall, map[string]any) (map[string]any, error) { return nil, nil })
	reg.SetProcedureExecutor(x)
	surfacetest.MustRegister(t, reg, surface.Component{
		Type: "shop.cart", InstanceID: "main", Description: "The cart", Parent: &surface.Parent{Type: "shop", InstanceID: "page"},
		Meta: map[string]any{"area": "checkout"},
		Observations: map[string]surface.Capability{"readCart": surface.Observation(surface.ObservationDef[cart]{
			Description: "Read the cart", Meta: map[string]any{"o": 1},
			Read: func(context.Context, *surface.Call) (cart, error) { return cart{}, nil },
		})},
		Actions: map[string]surface.Capability{"addItem": surface.Action(surface.ActionDef[addItem, cart]{
			Description: "Add an item", Effect: surface.EffectNavigation, Idempotent: true, Irreversible: true,
			Confirmation: surface.ConfirmOptional, Meta: map[string]any{"a": 2},
			Execute: func(context.Context, *surface.Call, addItem) (cart, error) { return cart{}, nil },
		})},
		Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[refundIn, refundOut]{
			ID: "domain:shop.refund", Description: "Refund an order", Effect: surface.EffectDestructive,
			Bound: []string{"orderId"}, Bind: func(context.Context) (map[string]any, error) { return map[string]any{"orderId": "o1"}, nil },
			Context: &surface.Parent{Type: "shop.orders", InstanceID: "list"}, Meta: map[string]any{"p": 3},
		})},
	})
	return reg
}

// fieldsOf returns the JSON fields of v.
func fieldsOf(t *testing.T, v any) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Every recorded descriptor field arrives in the contract with its value:
// a field mapped in descriptorFields but not recorded (or recorded
// wrong) fails here.
func TestDescriptorFieldsRecorded(t *testing.T) {
	reg := fieldsRegistry(t)
	consumer := surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
	snap := reg.Snapshot(surface.SnapshotOptions{Consumer: consumer})
	c, err := contract.FromRegistry(reg, consumer)
	if err != nil {
		t.Fatal(err)
	}
	view := c.Consumers[0]
	byID := map[string]contract.Capability{}
	for _, cp := range view.Capabilities {
		byID[cp.CapabilityID] = cp
	}
	shown := map[reflect.Type]map[string]bool{} // the mapped fields the fixture set
	// check compares the descriptor desc with what records it.
	var check func(desc, rec any)
	check = func(desc, rec any) {
		typ := reflect.TypeOf(desc)
		names := jsonNames(typ)
		d, r := fieldsOf(t, desc), fieldsOf(t, rec)
		if shown[typ] == nil {
			shown[typ] = map[string]bool{}
		}
		for field, where := range fieldsTable(typ) {
			if strings.HasPrefix(where, "(") {
				continue
			}
			got, want := r[where], d[names[field]]
			if want == nil || string(want) == "null" || string(want) == "[]" {
				continue // not set by this descriptor
			}
			shown[typ][field] = true
			if field == "BoundFields" {
				var ds []surface.BoundField
				var rs []contract.BoundField
				_ = json.Unmarshal(want, &ds)
				_ = json.Unmarshal(got, &rs)
				if len(ds) != len(rs) {
					t.Errorf("%s.%s: %s recorded as %s", typ.Name(), field, want, got)
					continue
				}
				for i := range ds {
					check(ds[i], rs[i])
				}
				continue
			}
			if !equalCanonical(want, got) {
				t.Errorf("%s.%s: %s recorded as %s %q", typ.Name(), field, want, where, got)
			}
		}
	}
	for _, comp := range snap.Components {
		i := slices.IndexFunc(view.Components, func(x contract.Component) bool { return x.Type == comp.Type })
		if i < 0 {
			t.Fatalf("component %s not recorded", comp.Type)
		}
		check(comp, view.Components[i])
		for _, o := range comp.Observations {
			check(o, byID[o.CapabilityID])
		}
		for _, a := range comp.Actions {
			check(a, byID[a.CapabilityID])
		}
	}
	for _, p := range snap.Procedures {
		check(p, byID[p.ProcedureID])
	}
	for typ := range descriptorFields {
		for field, where := range fieldsTable(typ) {
			if !strings.HasPrefix(where, "(") && !shown[typ][field] {
				t.Errorf("%s.%s: the fixture leaves it unset, so nothing checks that it is recorded", typ.Name(), field)
			}
		}
	}
}

// equalCanonical reports whether two JSON texts are the same value.
func equalCanonical(a, b json.RawMessage) bool {
	ca, err1 := canonical.Canonicalize(a)
	cb, err2 := canonical.Canonicalize(b)
	return err1 == nil && err2 == nil && string(ca) == string(cb)
}
