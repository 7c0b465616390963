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
//	old, err := contract.Parse(committed)
//	changes, err := contract.Compare(old, c)
//	if bad := contract.Classes{contract.Widening}.Failing(changes); len(bad) > 0 {
//		contract.WriteTable(os.Stderr, bad)
//	}
//
// In Go tests, surfacetest.RequireContract writes a registry's contract
// under testdata with -update and fails with the classified changes when
// it differs. The agentsurface command prints the contract of a running
// surface over MCP (agentsurface contract) and the classified changes
// between two contract files (agentsurface diff); the repository's
// README has a CI recipe that fails a pull request whose committed
// contract widens the base branch's.
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
// policies, their layers, hooks and votes for the consumer, and the
// registry's consumer view of it ([surface.View]), which is the
// visibility: hidden; disabled, with the disabling policy's reason;
// else exposed (whether the live state makes it available is not part
// of a contract). [surface.Registry.Snapshot] gives, for what is not
// hidden, the descriptor of each capability and component, which the
// contract records field by field under the descriptor's JSON names, but
// live state: the descriptions, effects, idempotency, reversibility,
// declared confirmation levels, schemas, bound fields, contexts and meta
// records; the explanation also gives the standing-grant ceiling. A
// toolset's catalog ([surface.NewToolset]) gives the wire names, what a
// descriptor leaves implicit (an observation's effect, idempotency and
// level, a procedure reference's idempotency) and the annotations, which are those mcpsurface serves: both compute them with
// [surface.Tool.Hints] ([AnnotationsFor] does too). Of a hidden
// capability a contract records only its id, kind, component,
// description and policies: the consumer is shown nothing else.
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
// StandingGrants, from [surface.CapabilityExplanation].Grants, is the
// ceiling of the standing grants a person may make to let a consumer's
// calls skip the confirmation question (issue "standing grants"): its
// longest TTL (maxTtlMs) and most uses (maxUses, left out for no cap),
// absent when no grant may. A capability that becomes grantable, or whose
// ceiling widens, widens what the consumer may do without a person
// looking.
//
// ConfirmationByPolicy is "required" when a RequireConfirmation policy is
// in the capability's chain. The registry does not show a policy's
// condition, so the contract cannot tell a policy that asks on every call
// from one that asks for some inputs only; removing either is a
// widening.
//
// # The rule table
//
// [Compare] reports every difference as one [Change] with a class. A
// change is widening when the consumer may do more, or when the
// classifier cannot show that it may not; narrowing when it may do less;
// neutral when what it may do is unchanged. A change that widens in one
// respect and narrows in another, or that cannot be ordered, is a mixed
// widening: widening whichever contract is the old one. Swapping the two
// contracts turns every other widening into a narrowing and back, and
// keeps neutral changes neutral (a property test checks it).
//
//	field                 widening                              narrowing                      neutral
//	consumer              added, and sees a capability          removed, and saw one           added or removed seeing none
//	capability            added, not hidden                     removed, was not hidden        added or removed while hidden
//	visibility            hidden → disabled → listed → exposed  the converse                   -
//	kind                  any change (mixed)                    -                              -
//	effect                raised in reach: read < local-state,  lowered                        -
//	                      navigation < server-query <
//	                      server-mutation < external-side-
//	                      effect, destructive; between equals
//	                      (local-state and navigation, external-
//	                      side-effect and destructive) mixed
//	idempotent            false → true                          true → false                   -
//	reversible            false → true                          true → false                   -
//	confirmation          lowered (never < optional < required) raised                         -
//	confirmationByPolicy  required → none                       none → required                -
//	requiresConfirmation  true → false, when no confirmation    false → true, likewise         when both contracts record
//	                      level is recorded (MCP)                                              the level (it follows from it)
//	inputSchema,          the new schema may accept a value     the new schema refuses a       an equivalent schema
//	outputSchema          the old one refuses (mixed when the   value the old one accepted
//	                      converse holds too)
//	standingGrants        absent → present (became grantable);  present → absent; the          -
//	                      maxTtlMs or maxUses raised (no cap    ceiling lowered
//	                      is the most; mixed when one rises
//	                      and the other falls)
//	boundFields[path]     removed (the agent supplies it now),  added, or locked               -
//	                      or unlocked
//	annotations           now served over MCP (registry)        no longer served               -
//	annotations.<hint>    towards safer (readOnlyHint or        towards less safe              when both contracts record the
//	                      idempotentHint true, destructiveHint                                 kind, effect and idempotency
//	                      or openWorldHint false), when the                                    they follow from; title
//	                      facts are not recorded
//	policies[layer name]  removed; hooks removed (mixed when    added; hooks added; now        vote and reason (the visibility
//	                      others were added); no longer         raises the confirmation        row carries them)
//	                      raises the confirmation level         level
//	policies              the chain's order changed (mixed)     -                              -
//	description, wireName, context, disabledReason, meta, grants, identity (kind, id), components,
//	a policy's hooks in another order, annotations written out or left to MCP's defaults:
//	                      -                                     -                              any change
//
// The rows effect, idempotent, reversible and confirmation are those of
// the facts a capability declares about its calls, the fields of
// [surface.Declaration], which a contract records by JSON name ([Facts]):
// a fact surface.Declaration gains is recorded, written and parsed with
// no change here, and compared by its own rule row; a fact with no row is
// compared as a mixed widening, never passed over.
//
// When a capability is hidden in either contract, the visibility row
// carries the class, and what else changed (what a capability that
// comes out of hiding shows, what one that goes into hiding no longer
// shows) is listed as neutral rows: the consumer was, or is, shown
// nothing of it. An absent schema compares as what its absence means: no
// input (the empty object) for an input schema, any value for an output
// schema. Every difference between two contract files gives at least one
// change (a property test checks that too).
//
// # Schemas
//
// A schema change is classified by the schema subset's inclusion prover
// (internal/schema), on the compiled schemas, under the validator's
// rules: the new schema widens unless every value it accepts is shown to
// be accepted by the old one, and narrows unless the converse is shown.
// The proof follows $ref, distributes anyOf, compares types (integer
// within number), the bounds and counts of strings, numbers, arrays and
// objects, required and declared properties and additionalProperties,
// and checks a finite set of values (const, enum, booleans and null)
// value by value with the validator itself. What it cannot show counts as
// not shown, so an unclassifiable change is a widening (or a mixed one),
// never neutral: a pattern or format it cannot compare, a keyword it does
// not model ("unproven": patternProperties next to additionalProperties
// false, prefixItems next to items, a keyword of no known vocabulary, a
// dialect other than draft 2020-12 and draft-07), a schema too complex to
// compare within its budget ("unproven: too complex"). A keyword outside
// the subset that can only restrict (not, allOf, minProperties, ...) still
// lets a change that adds it narrow. The proof is sound, not complete: a
// change it calls widening may in fact accept nothing new; a change it
// calls narrowing or neutral never accepts anything new.
//
// The work is bounded: each proof may do a fixed number of steps, the
// proofs of one [Compare] together at most [CompareWork], after which
// every further schema change is an unproven widening without trying; a
// schema longer than [MaxSchemaBytes], or schemas longer than
// [MaxSchemasBytes] in one contract, are refused with a [*LimitError]
// ([ErrTooLarge]).
//
// A contract compares the schemas agents are shown. The element type of
// an inferred Go map is enforced by the registry but not part of the
// shown schema (the subset has no schema-valued additionalProperties), so
// a contract cannot see it change.
package contract
