package contract

import (
	"encoding/json"
	"errors"
	"maps"
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
// schema; observations take the empty object):
//
//   - readOnlyHint: an observation, or a server-query procedure;
//   - destructiveHint: true for a destructive effect, false otherwise;
//   - idempotentHint: the capability's idempotency;
//   - openWorldHint: true for an external side effect, false otherwise.
func AnnotationsFor(kind surface.Kind, effect surface.Effect, idempotent bool, inputSchema json.RawMessage) *Annotations {
	if kind != surface.KindObservation && !objectSchema(inputSchema) {
		return nil
	}
	return &Annotations{
		ReadOnlyHint:    kind == surface.KindObservation || effect == surface.EffectRead || effect == surface.EffectServerQuery,
		DestructiveHint: ptr(effect == surface.EffectDestructive),
		IdempotentHint:  idempotent,
		OpenWorldHint:   ptr(effect == surface.EffectExternalSideEffect),
	}
}

// objectSchema reports whether a schema's root type is exactly "object".
func objectSchema(s json.RawMessage) bool {
	var root struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(s, &root) == nil && root.Type == "object"
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
//   - wireName, inputSchema, outputSchema (mcpsurface sends none) and
//     annotations: as listed;
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
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
		if t.Annotations != nil {
			a := *t.Annotations
			c.Annotations = &a
		}
		meta := maps.Clone(t.Meta)
		c.CapabilityID, _ = meta[MetaCapabilityID].(string)
		kind, _ := meta[MetaKind].(string)
		effect, _ := meta[MetaEffect].(string)
		c.Kind, c.Effect = surface.Kind(kind), surface.Effect(effect)
		if c.CapabilityID != "" {
			if desc, prefixEffect, required, ok := splitDescription(t.Description); ok && (effect == "" || prefixEffect == c.Effect) {
				c.Description, c.RequiresConfirmation = desc, ptr(required)
				if c.Effect == "" {
					c.Effect = prefixEffect
				}
			}
			if c.Annotations != nil {
				c.Idempotent = ptr(c.Annotations.IdempotentHint)
			}
		}
		v.Capabilities = append(v.Capabilities, c)
	}
	return (&Contract{Format: Format, Version: Version, Source: SourceMCP, Consumers: []ConsumerView{v}}).normalized()
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
