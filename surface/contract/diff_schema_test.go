package contract_test

import (
	"encoding/json"
	"testing"

	"github.com/agentsurface/agentsurface/surface/contract"
)

// withInput returns the hand-made contract with the refund's input schema
// replaced.
func withInput(schema string) *contract.Contract {
	c := base()
	c.Consumers[0].Capabilities[0].InputSchema = json.RawMessage(schema)
	return c
}

// The widenings of issue 38 item 3, which a gate with --fail widening let
// through: a construct the prover does not model is a widening, never
// narrowing or neutral.
func TestOutsideConstructsWiden(t *testing.T) {
	const reason = `"reason":{"type":"string","maxLength":100}`
	for _, tc := range []struct {
		name, old, new string
		mixed          bool
	}{
		{"patternProperties next to additionalProperties false",
			`{"type":"object","properties":{` + reason + `},"required":["reason"],"additionalProperties":false}`,
			`{"type":"object","properties":{` + reason + `},"required":["reason"],"additionalProperties":false,"patternProperties":{"^x":{}}}`, true},
		{"prefixItems next to items",
			`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`,
			`{"type":"object","properties":{"ids":{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"string"}}},"additionalProperties":false}`, true},
		{"a true branch inside anyOf",
			`{"type":"object","properties":{"reason":{"anyOf":[{"type":"string","maxLength":100}]}},"required":["reason"],"additionalProperties":false}`,
			`{"type":"object","properties":{"reason":{"anyOf":[{"type":"string","maxLength":100},true]}},"required":["reason"],"additionalProperties":false}`, false},
		{"an unknown keyword",
			`{"type":"object","properties":{` + reason + `},"required":["reason"],"additionalProperties":false}`,
			`{"type":"object","properties":{"reason":{"type":"string","maxLength":100,"x-widen":true}},"required":["reason"],"additionalProperties":false}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes := compare(t, withInput(tc.old), withInput(tc.new))
			requireChanges(t, changes, []change{{"inputSchema", contract.Widening, tc.mixed}})
			if failing := (contract.Classes{contract.Widening}).Failing(changes); len(failing) != 1 {
				t.Fatalf("--fail widening passes:\n%s", table(changes))
			}
		})
	}
}
