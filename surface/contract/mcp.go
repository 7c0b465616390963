package contract

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/agentsurface/agentsurface/surface"
)

// Keys of the _meta fields that mcpsurface writes on the tools it serves
// (the values of mcpsurface's constants of the same names, restated here
// because this package imports no MCP code).
const (
	MetaCapabilityID = "agentsurface/capabilityId"
	MetaKind         = "agentsurface/kind"
	MetaEffect       = "agentsurface/effect"
)

// AnnotationsFor returns the MCP tool annotations mcpsurface serves for a
// capability of this kind, effect and idempotency, or nil when it does
// not serve the capability's tool at all (MCP requires an object input
// schema; observations take the empty object), but the title, which
// depends on the capability's id ([surface.Tool.Title]; a registry
// contract records it). Both compute them with [surface.Tool.Hints] and
// [surface.Tool.ObjectInput]:
//
//   - readOnlyHint: an observation, or a server-query procedure;
//   - destructiveHint: true for a destructive effect, false otherwise;
//   - idempotentHint: the capability's idempotency;
//   - openWorldHint: true for an external side effect, false otherwise.
func AnnotationsFor(kind surface.Kind, effect surface.Effect, idempotent bool, inputSchema json.RawMessage) *Annotations {
	t := surface.Tool{Kind: kind, Declaration: surface.Declaration{Effect: effect, Idempotent: idempotent}, InputSchema: surface.JSONText(inputSchema)}
	if kind == surface.KindObservation {
		t.InputSchema = `{"type":"object"}` // an observation's tool takes the empty object
	}
	return annotationsOf(t)
}

// annotationsOf returns the annotations mcpsurface serves for tool t, nil
// when it does not serve it.
func annotationsOf(t surface.Tool) *Annotations {
	if !t.ObjectInput() {
		return nil
	}
	h := t.Hints()
	return &Annotations{ReadOnlyHint: h.ReadOnly, DestructiveHint: ptr(h.Destructive), IdempotentHint: h.Idempotent, OpenWorldHint: ptr(h.OpenWorld),
		Title: titleOf(t)}
}

// titleOf is the title mcpsurface serves for tool t ([surface.Tool.Title]),
// "" for a tool without a capability id (AnnotationsFor's, which knows
// none).
func titleOf(t surface.Tool) string {
	if t.CapabilityID == "" {
		return ""
	}
	return t.Title()
}

// Tool is one tool as an MCP server lists it in tools/list: the fields
// [FromTools] reads, under MCP's JSON names, so that a listed tool
// decodes into it.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  *Annotations    `json:"annotations,omitempty"`
	Meta         map[string]any  `json:"_meta,omitempty"`
}

// FromTools returns the contract of what an MCP server lists to one
// consumer, named consumer in the contract (the server does not say who
// it takes the caller for). Tools carry less than the registry knows;
// FromTools records what they tell faithfully and leaves the rest out:
//
//   - wireName, inputSchema and annotations: as listed;
//   - outputSchema: the capability's, which mcpsurface declares under
//     "output" of the result envelope it lists as the tool's outputSchema
//     (with its $defs at the envelope's root); any other outputSchema as
//     listed;
//   - capabilityId, kind and effect: from the _meta fields mcpsurface
//     writes ([MetaCapabilityID], [MetaKind], [MetaEffect]);
//   - description and requiresConfirmation: from the tool description,
//     without the "[plane · effect · requires confirmation] " prefix of
//     agentsurface tools;
//   - idempotent: from idempotentHint, for tools that carry a capability
//     id (mcpsurface sets the hint to exactly the capability's
//     idempotency);
//   - visibility: [Listed]. A hidden capability is not listed, so an MCP
//     contract cannot know it exists; availability is live state.
//
// Unknown over MCP, and so absent: the component, a procedure's context,
// reversible, the declared confirmation level and the policies' floor
// (only whether the level is required shows), bound fields, meta and the
// policy chain.
func FromTools(consumer string, tools []Tool) (*Contract, error) {
	if consumer == "" {
		return nil, errors.New("contract: FromTools needs a consumer name")
	}
	v := ConsumerView{Name: consumer, Capabilities: make([]Capability, 0, len(tools))}
	for _, t := range tools {
		c := Capability{WireName: t.Name, Visibility: Listed, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: outputOf(t.OutputSchema)}
		if t.Annotations != nil {
			a := *t.Annotations
			c.Annotations = &a
		}
		meta := maps.Clone(t.Meta)
		c.CapabilityID, _ = meta[MetaCapabilityID].(string)
		kind, _ := meta[MetaKind].(string)
		effect, _ := meta[MetaEffect].(string)
		c.Kind = surface.Kind(kind)
		c.Declared.Set(factEffect, effect)
		if c.CapabilityID != "" {
			if desc, prefixEffect, required, ok := splitDescription(t.Description); ok && (effect == "" || prefixEffect == surface.Effect(effect)) {
				c.Description, c.RequiresConfirmation = desc, ptr(required)
				if effect == "" {
					c.Declared.Set(factEffect, prefixEffect)
				}
			}
			if c.Annotations != nil {
				c.Declared.Set(factIdempotent, c.Annotations.IdempotentHint)
			}
		}
		v.Capabilities = append(v.Capabilities, c)
	}
	return (&Contract{Format: Format, Version: Version, Source: SourceMCP, Consumers: []ConsumerView{v}}).normalized()
}

// outputOf returns the output schema of a capability from the outputSchema
// of its tool: mcpsurface lists the result envelope, with the
// capability's schema under properties.output and that schema's $defs at
// the root; nil when the envelope has no output (the capability has
// none). A schema that is not such an envelope is returned as it is.
func outputOf(s json.RawMessage) json.RawMessage {
	var env struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Defs       json.RawMessage            `json:"$defs"`
	}
	if len(s) == 0 || json.Unmarshal(s, &env) != nil || env.Properties["status"] == nil || env.Properties["invocationId"] == nil ||
		env.Properties["surfaceVersion"] == nil || !slices.Contains(env.Required, "invocationId") {
		return s
	}
	out, ok := env.Properties["output"]
	if !ok {
		return nil
	}
	if len(env.Defs) == 0 {
		return out
	}
	var schema map[string]json.RawMessage
	if json.Unmarshal(out, &schema) != nil {
		return out
	}
	schema["$defs"] = env.Defs
	b, err := json.Marshal(schema)
	if err != nil {
		return out
	}
	return b
}

// confirmationMarker is the part of a tool description's prefix that
// announces a required confirmation.
const confirmationMarker = "requires confirmation"

// splitDescription takes apart a toolset description, "[view · <effect>]
// text" or "[domain · <effect> · requires confirmation] text".
func splitDescription(d string) (text string, effect surface.Effect, required, ok bool) {
	rest, found := strings.CutPrefix(d, "[")
	if !found {
		return "", "", false, false
	}
	head, text, found := strings.Cut(rest, "] ")
	if !found {
		return "", "", false, false
	}
	parts := strings.Split(head, " · ")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != string(surface.PlaneView) && parts[0] != string(surface.PlaneDomain) || parts[1] == "" {
		return "", "", false, false
	}
	if len(parts) == 3 {
		if parts[2] != confirmationMarker {
			return "", "", false, false
		}
		required = true
	}
	return text, surface.Effect(parts[1]), required, true
}
