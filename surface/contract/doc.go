// Package contract takes the contract of an agentsurface surface — what
// each named consumer may observe and do — as a deterministic,
// reviewable file, and classifies every difference between two
// contracts as widening, narrowing or neutral, so that a change to what
// agents may do is reviewed as what it is and a CI check can refuse the
// ones that widen.
//
//	c, err := contract.FromRegistry(reg,
//		surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge},
//		surface.Consumer{ID: "console", Kind: surface.ConsumerEmbedded})
//	if err != nil {
//		return err
//	}
//	file, err := c.Encode() // commit it, e.g. under testdata/
//
// # The contract file
//
// A contract is JSON, indented, with a final newline:
//
//	{
//	  "format": "agentsurface.contract",
//	  "version": 1,
//	  "source": "registry",
//	  "consumers": [
//	    {
//	      "consumer": "mcp-bridge:agent",
//	      "kind": "mcp-bridge",
//	      "id": "agent",
//	      "components": [ {"type": …, "instanceId": …, "description": …} ],
//	      "capabilities": [
//	        {
//	          "capabilityId": "domain:devices.disable",
//	          "kind": "procedure",
//	          "component": {"type": "devices.table", "instanceId": "main"},
//	          "context": {"type": "devices.table", "instanceId": "main"},
//	          "wireName": "domain_devices__disable",
//	          "visibility": "exposed",
//	          "description": "Disable devices. …",
//	          "effect": "destructive",
//	          "idempotent": false,
//	          "confirmation": "required",
//	          "confirmationByPolicy": "required",
//	          "requiresConfirmation": true,
//	          "inputSchema": {…},
//	          "outputSchema": {…},
//	          "boundFields": [{"path": "ids", "locked": true}],
//	          "annotations": {"readOnlyHint": false, "destructiveHint": true, …},
//	          "policies": [{"name": "require-confirmation", "layer": "component", "hooks": ["invoke"], "requiresConfirmation": true}]
//	        }
//	      ]
//	    }
//	  ]
//	}
//
// It holds no registration id, surface id, version, time or live state
// (availability, contextual notes, the route): two runs, two machines or
// two Go map orders give the same bytes. Consumers are ordered by name,
// components by type and instance id, capabilities by key: the
// capability id and the registering component
// ("domain:devices.disable @ devices.table/main"). Schemas and meta
// records are canonical JSON (keys sorted), so an authored key order
// never shows as a change. Format and version identify the format; a
// reader refuses any other.
//
// # Where each field comes from
//
// [FromRegistry] reads the registry's public API. [surface.Registry.Explain]
// gives every capability, hidden ones included, with its chain of
// policies, their layers, hooks and votes for the consumer; visibility is
// composed from the votes (any hide: hidden; else the first disable:
// disabled with its reason; else exposed). [surface.Registry.Snapshot]
// gives, for what is not hidden, the descriptions, effects, idempotency,
// reversibility, declared confirmation levels, schemas, bound fields,
// contexts and meta records. A toolset's catalog ([surface.NewToolset])
// gives the wire names. The annotations are those mcpsurface serves,
// restated from the facts by [AnnotationsFor] (a test checks that
// mcpsurface agrees). Of a hidden capability a contract records only its
// id, kind, component, description and policies: the consumer is shown
// nothing else, and nothing else is compared.
//
// [FromTools] reads what an MCP server lists (see the agentsurface
// contract command), which is less. It knows the wire name, the schemas
// and annotations as listed, the capability id, kind and effect from the
// _meta fields mcpsurface writes, the description and whether calls
// require confirmation from the tool description, and the idempotency
// from idempotentHint. Every tool is [Listed]: hidden capabilities are not
// listed at all, and a policy's disable cannot be told from the live
// state's unavailability. It cannot know, and so leaves out: the
// component (capabilities are keyed by wire name instead), a procedure's
// context, reversible, the declared confirmation level and the level
// policies may raise it to, bound fields, meta records and policies. An
// MCP contract is compared only with another MCP contract.
//
// ConfirmationByPolicy is "required" when a RequireConfirmation policy is
// in the capability's chain. The registry does not show a policy's
// condition, so the contract cannot tell a policy that asks on every call
// from one that asks for some inputs only; removing either is a
// widening.
//
// # Schemas
//
// A contract records the schemas agents are shown. The element type of
// an inferred Go map is enforced by the registry but not part of the
// shown schema (the subset has no schema-valued additionalProperties), so
// a contract cannot see it change.
package contract
