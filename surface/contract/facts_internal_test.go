package contract

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// unruledNote is the note of a change of a fact no rule row classifies.
const unruledNote = "no rule classifies a change of this fact"

// everyFactSet is an action's Declaration whose every field, one added
// later included, holds a value other than its zero, set by reflection.
func everyFactSet(t *testing.T) surface.Declaration {
	t.Helper()
	var d surface.Declaration
	v := reflect.ValueOf(&d).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("set-" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(7)
		default:
			t.Fatalf("surface.Declaration.%s is a %s: teach everyFactSet a value of it", v.Type().Field(i).Name, f.Kind())
		}
	}
	return d
}

// Every fact a capability may declare has its rule row in the diff, and
// the facts the contract reads by name are facts of surface.Declaration:
// a field added to it, or renamed, fails here until diff.go has its row.
func TestEveryFactHasARule(t *testing.T) {
	if len(declared) != reflect.TypeFor[surface.Declaration]().NumField() {
		t.Fatalf("%d facts for the %d fields of surface.Declaration", len(declared), reflect.TypeFor[surface.Declaration]().NumField())
	}
	for _, f := range declared {
		if !slices.ContainsFunc(factRules, func(r factRule) bool { return r.name == f.name }) {
			t.Errorf("fact %q (surface.Declaration) has no rule row in factRules (diff.go): a change of it is an unclassified mixed widening", f.name)
		}
	}
	for i, r := range factRules {
		if _, ok := factNamed(r.name); !ok {
			t.Errorf("factRules has a row for %q, which surface.Declaration does not declare", r.name)
		}
		if slices.ContainsFunc(factRules[:i], func(q factRule) bool { return q.name == r.name }) {
			t.Errorf("factRules has two rows for %q", r.name)
		}
	}
	for _, name := range []string{factEffect, factIdempotent, factConfirmation} {
		if d, ok := factNamed(name); !ok || d.name != name {
			t.Errorf("the contract reads fact %q, which surface.Declaration does not declare", name)
		}
	}
}

// One capability record from definition to wire, the contract's part:
// every field of an action's Declaration, one added later included, is
// recorded from its descriptor as a fact under its JSON name with its
// value, survives the file form, and a change of it is classified by its
// own rule row.
func TestEveryFactRecordedAndCompared(t *testing.T) {
	d := everyFactSet(t)
	desc := surface.ActionDescriptor{CapabilityID: "view:t.go", Name: "go", Description: "Goes",
		InputSchema: `{"type":"object"}`, Declaration: d, Available: true}
	c, err := recordCap(desc)
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(d)
	for i, f := range declared {
		want, _ := json.Marshal(v.Field(i).Interface())
		if got := c.Declared[f.name]; string(got) != string(want) {
			t.Errorf("fact %s: recorded %s, the descriptor has %s", f.name, got, want)
		}
	}
	if len(c.Declared) != len(declared) {
		t.Errorf("recorded facts %v, want the %d of surface.Declaration", c.Declared, len(declared))
	}

	c.CapabilityID, c.Kind, c.Visibility = desc.CapabilityID, surface.KindAction, Exposed
	c.Component = &surface.Parent{Type: "t", InstanceID: "main"}
	old := &Contract{Format: Format, Version: Version, Source: SourceRegistry,
		Consumers: []ConsumerView{{Name: "mcp-bridge:a", Capabilities: []Capability{*c}}}}
	b, err := old.Encode()
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got := parsed.Consumers[0].Capabilities[0].Declared; !reflect.DeepEqual(got, c.Declared) {
		t.Errorf("the file form gives back %v, want %v:\n%s", got, c.Declared, b)
	}

	for _, f := range declared {
		new, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		delete(new.Consumers[0].Capabilities[0].Declared, f.name) // now unknown
		changes, err := Compare(old, new)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 1 || changes[0].Field != f.name || changes[0].Note == unruledNote || string(changes[0].Before) == "" {
			t.Errorf("fact %s made unknown: changes %+v, want one of its own rule row", f.name, changes)
		}
	}
}

// A fact no rule row classifies (one added to surface.Declaration
// without its row) is not passed over: a change of it is a mixed
// widening, whichever contract is the old one.
func TestUnruledFactIsMixedWidening(t *testing.T) {
	saved := factRules
	t.Cleanup(func() { factRules = saved })
	factRules = slices.DeleteFunc(slices.Clone(factRules), func(r factRule) bool { return r.name == "reversible" })

	capab := func(reversible bool) *Contract {
		c := Capability{CapabilityID: "view:t.go", Kind: surface.KindAction, Component: &surface.Parent{Type: "t", InstanceID: "main"},
			Visibility: Exposed}
		c.Declared.Set("effect", surface.EffectLocalState)
		c.Declared.Set("reversible", reversible)
		return &Contract{Format: Format, Version: Version, Source: SourceRegistry, Consumers: []ConsumerView{{Name: "a", Capabilities: []Capability{c}}}}
	}
	for _, pair := range [][2]bool{{false, true}, {true, false}} {
		changes, err := Compare(capab(pair[0]), capab(pair[1]))
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 1 || changes[0].Field != "reversible" || changes[0].Class != Widening || !changes[0].Mixed || changes[0].Note != unruledNote {
			t.Errorf("reversible %v → %v without its rule: %+v", pair[0], pair[1], changes)
		}
	}
}
