package contract_test

import (
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
)

// BenchmarkFromRegistry takes the shop's contract for two consumers and
// encodes it (14 capabilities each, one hidden from one consumer).
func BenchmarkFromRegistry(b *testing.B) {
	reg := shop(b, shopOptions{})
	b.ReportAllocs()
	for b.Loop() {
		c, err := contract.FromRegistry(reg, agent, console)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompare compares the shop's contract with one where every
// capability's input schema changed (each proved by the schema checker).
func BenchmarkCompare(b *testing.B) {
	old := must(contract.FromRegistry(shop(b, shopOptions{}), agent, console))
	new := must(contract.FromRegistry(shop(b, shopOptions{edit: func(cart, _ *surface.Component) {
		cart.Actions["addItem"] = surface.Action(surface.ActionDef[addItem, surface.None]{
			Description: "Add an item", Effect: surface.EffectLocalState, Execute: noop[addItem](),
			InputSchema: []byte(`{"type":"object","properties":{"id":{"type":"string","maxLength":10},"quantity":{"type":"integer","minimum":1}},"required":["id"],"additionalProperties":false}`),
		})
	}}), agent, console))
	b.ReportAllocs()
	for b.Loop() {
		changes, err := contract.Compare(old, new)
		if err != nil || len(changes) != 2 {
			b.Fatal(err, len(changes))
		}
	}
}
