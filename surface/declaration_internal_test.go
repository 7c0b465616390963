package surface

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// everyFactSet is a Declaration whose every field, one added later
// included, holds a value other than its zero, set by reflection.
func everyFactSet(t *testing.T) Declaration {
	t.Helper()
	var d Declaration
	v := reflect.ValueOf(&d).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("set-" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(7)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(7)
		case reflect.Float32, reflect.Float64:
			f.SetFloat(7)
		default:
			t.Fatalf("Declaration.%s is a %s: teach everyFactSet a value of it", v.Type().Field(i).Name, f.Kind())
		}
	}
	return d
}

// One capability record from definition to wire: every field of an
// action's Declaration, a field added later included, reaches its tool
// (the catalog copies the descriptor's Declaration whole) and is a field
// of the descriptor's JSON encoding under its own name (the descriptor
// embeds it), where surface/contract records it as a fact.
func TestDeclarationReachesToolAndWire(t *testing.T) {
	d := everyFactSet(t)
	desc := ActionDescriptor{CapabilityID: "view:t.go", Name: "go", Description: "Goes", InputSchema: emptyObject, Declaration: d}
	tools := catalog(Snapshot{SurfaceVersion: "1", Components: []ComponentDescriptor{{
		Type: "t", InstanceID: "main", RegistrationID: "reg_1", Actions: []ActionDescriptor{desc}}}})
	if len(tools) != 1 {
		t.Fatalf("%d tools", len(tools))
	}
	if got := tools[0].Declaration; !reflect.DeepEqual(got, d) {
		t.Errorf("the tool declares %+v, its descriptor %+v", got, d)
	}

	b, err := json.Marshal(desc)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(d)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		want, _ := json.Marshal(v.Field(i).Interface())
		if got := wire[name]; string(got) != string(want) {
			t.Errorf("Declaration.%s: the descriptor's JSON has %q: %s, want %s", f.Name, name, got, want)
		}
	}
	if _, ok := wire["Declaration"]; ok {
		t.Error("the descriptor's JSON nests its Declaration")
	}
}
