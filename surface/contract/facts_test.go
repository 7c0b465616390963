package contract_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
)

// fileWith is a registry contract file whose one capability has the
// given JSON fields after its visibility.
func fileWith(fields string) string {
	return `{"format":"agentsurface.contract","version":1,"source":"registry","consumers":[{"consumer":"a","capabilities":[` +
		`{"capabilityId":"view:t.go","visibility":"exposed"` + fields + `}]}]}`
}

// In a contract file the declared facts are fields of the capability: a
// fact of no value (null, "") is unknown, absent rather than false; a
// fact of the wrong type, a fact surface.Declaration does not declare,
// and any other field the format does not have (at any depth) are
// refused.
func TestFactsInTheFile(t *testing.T) {
	c, err := contract.Parse([]byte(fileWith(`,"effect":"navigation","idempotent":false,"reversible":null,"confirmation":""`)))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Consumers[0].Capabilities[0].Declared
	if len(got) != 2 || string(got["effect"]) != `"navigation"` || string(got["idempotent"]) != `false` {
		t.Fatalf("facts %v, want effect and idempotent only (false is known, null and \"\" are not)", got)
	}
	if e, ok := contract.Fact[surface.Effect](got, "effect"); !ok || e != surface.EffectNavigation {
		t.Errorf("Fact effect = %q, %v", e, ok)
	}
	if r, ok := contract.Fact[bool](got, "reversible"); ok || r {
		t.Errorf("Fact reversible = %v, %v: an unknown fact is not false", r, ok)
	}

	// encoding/json matches a field's key but for case; so do the facts.
	if c, err := contract.Parse([]byte(fileWith(`,"Reversible":true`))); err != nil || string(c.Consumers[0].Capabilities[0].Declared["reversible"]) != "true" {
		t.Errorf("a case-folded key: %v %v", err, c)
	}

	for _, tc := range []struct{ name, fields, want string }{
		{"a fact of the wrong type", `,"idempotent":"yes"`, "idempotent"},
		{"an effect that is not a string", `,"effect":5`, "effect"},
		{"a field the format does not have", `,"teleports":true`, "unknown field"},
		{"a nested field the format does not have", `,"boundFields":[{"path":"x","locked":true,"source":"ui-state"}]`, "unknown field"},
	} {
		if _, err := contract.Parse([]byte(fileWith(tc.fields))); !errors.Is(err, contract.ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrFormat mentioning %q", tc.name, err, tc.want)
		}
	}

	// A contract made in code is checked the same way when encoded.
	odd := contract.Capability{CapabilityID: "view:t.go", Visibility: contract.Exposed, Declared: contract.Facts{"teleports": json.RawMessage("true")}}
	k := &contract.Contract{Format: contract.Format, Version: contract.Version, Source: contract.SourceRegistry,
		Consumers: []contract.ConsumerView{{Name: "a", Capabilities: []contract.Capability{odd}}}}
	if _, err := k.Encode(); !errors.Is(err, contract.ErrFormat) || !strings.Contains(err.Error(), `unknown fact "teleports"`) {
		t.Errorf("an unknown fact in code: %v", err)
	}
	if _, err := json.Marshal(odd); !errors.Is(err, contract.ErrFormat) || !strings.Contains(err.Error(), `unknown fact "teleports"`) {
		t.Errorf("json.Marshal of an unknown fact: %v", err)
	}
}

// The facts are written where the capability's own fields were: after
// the description, in surface.Declaration's order, before the fields
// after them; the text is escaped as the encoder says (Encode writes
// "<", json.Marshal "\u003c"), as encoding/json does for any field.
func TestFactsEncoding(t *testing.T) {
	c := contract.Capability{CapabilityID: "view:t.go", Kind: surface.KindAction, Visibility: contract.Exposed, Description: "a <b> & c",
		ConfirmationByPolicy: surface.ConfirmRequired}
	c.Declared.Set("confirmation", surface.ConfirmOptional)
	c.Declared.Set("reversible", true)
	c.Declared.Set("effect", surface.EffectLocalState)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"capabilityId":"view:t.go","kind":"action","visibility":"exposed","description":"a \u003cb\u003e \u0026 c",` +
		`"effect":"local-state","reversible":true,"confirmation":"optional","confirmationByPolicy":"required"}`
	if string(b) != want {
		t.Errorf("json.Marshal:\n%s\nwant\n%s", b, want)
	}
	k := &contract.Contract{Format: contract.Format, Version: contract.Version, Source: contract.SourceRegistry,
		Consumers: []contract.ConsumerView{{Name: "a", Capabilities: []contract.Capability{c}}}}
	file, err := k.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), `"description": "a <b> & c",
          "effect": "local-state",
          "reversible": true,
          "confirmation": "optional",
          "confirmationByPolicy": "required"`) {
		t.Errorf("Encode:\n%s", file)
	}

	// No description, no field after the facts: they still come in order.
	bare := contract.Capability{CapabilityID: "view:t.go", Visibility: contract.Hidden}
	bare.Declared.Set("idempotent", false)
	bare.Declared.Set("effect", surface.EffectRead)
	if b, _ := json.Marshal(bare); string(b) != `{"capabilityId":"view:t.go","visibility":"hidden","effect":"read","idempotent":false}` {
		t.Errorf("bare: %s", b)
	}
}
