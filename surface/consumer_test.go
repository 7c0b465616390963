package surface_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
)

// AS-IDENT-004: property — consumer keys are unambiguous: two consumers
// share a key exactly when they are the same consumer (kind and id after
// defaults), whatever the text of their kinds and ids; only the known
// kinds are valid.
func TestConsumerKeyUnambiguous_AS_IDENT_004(t *testing.T) {
	known := []surface.ConsumerKind{"", surface.ConsumerEmbedded, surface.ConsumerWebMCP, surface.ConsumerMCPBridge, surface.ConsumerTest, surface.ConsumerOther}
	kind := rapid.OneOf(rapid.SampledFrom(known), rapid.Map(rapid.StringMatching(`[a-z:"?\\-]{0,8}`), func(s string) surface.ConsumerKind { return surface.ConsumerKind(s) }))
	id := rapid.StringMatching(`[a-z:"?\\]{0,8}`)
	norm := func(c surface.Consumer) surface.Consumer {
		if c.ID == "" {
			c.ID = "anonymous"
		}
		if c.Kind == "" {
			c.Kind = surface.ConsumerEmbedded
		}
		return c
	}
	rapid.Check(t, func(rt *rapid.T) {
		a := surface.Consumer{Kind: kind.Draw(rt, "kindA"), ID: id.Draw(rt, "idA")}
		b := surface.Consumer{Kind: kind.Draw(rt, "kindB"), ID: id.Draw(rt, "idB")}
		if rapid.Bool().Draw(rt, "shifted") {
			// The same text cut at another ":": {k, "x:y"} and {"k:x", y}.
			x, y := id.Draw(rt, "x"), id.Draw(rt, "y")
			a = surface.Consumer{Kind: a.Kind, ID: x + ":" + y}
			b = surface.Consumer{Kind: a.Kind + surface.ConsumerKind(":"+x), ID: y}
		}
		na, nb := norm(a), norm(b)
		if same := na.Kind == nb.Kind && na.ID == nb.ID; (a.Key() == b.Key()) != same {
			rt.Fatalf("%+v and %+v: keys %q and %q", a, b, a.Key(), b.Key())
		}
	})
	for _, k := range known {
		if !k.Valid() {
			t.Errorf("%q invalid", k)
		}
	}
	for _, k := range []surface.ConsumerKind{"mcp-bridge:a", "x", "Embedded", "embedded "} {
		if k.Valid() {
			t.Errorf("%q valid", k)
		}
	}
	if got := (surface.Consumer{}).Key(); got != "embedded:anonymous" {
		t.Fatal(got)
	}
}
