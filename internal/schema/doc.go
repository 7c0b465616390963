// Package schema implements the JSON Schema subset of agentsurface: the
// check of raw schemas against the subset, inference of schemas from Go
// types, a validator for exactly that subset, and the inclusion prover
// that classifies a change of schema as wider or narrower.
//
// # The subset
//
// A schema node is a JSON object (boolean schemas are rejected) using only
// these keywords:
//
//   - "type": one of object, array, string, number, integer, boolean,
//     null, or a non-empty array of distinct names (for nullability);
//     "enum" (a non-empty array) and "const";
//   - objects: "properties", "required" (distinct names) and
//     "additionalProperties" (a boolean only);
//   - arrays: "items" (a single schema), "minItems", "maxItems",
//     "uniqueItems";
//   - strings: "minLength", "maxLength", "pattern" (Go RE2 syntax,
//     unanchored search as JavaScript's RegExp.test), "format" ∈
//     {date-time, date, uuid, email, uri};
//   - numbers: "minimum", "maximum", "exclusiveMinimum",
//     "exclusiveMaximum" (numbers, as in draft 2020-12), "multipleOf"
//     (> 0);
//   - unions: "anyOf" (a non-empty array of schemas);
//   - annotations anywhere: "description", "title", "default",
//     "examples", "deprecated";
//   - "$defs" at the root and internal references "#/$defs/<name>"; "$schema"
//     and "$id" are tolerated at the root.
//
// Everything else (oneOf, allOf, not, if/then/else, patternProperties,
// prefixItems, remote references, ...) is rejected with an [*Error], as are
// reference cycles that consume no input (such as a definition that refers
// to itself directly or through anyOf), which would make validation loop.
// Recursion through "items" or "properties" is allowed: finite values end
// it.
//
// # Units and limits
//
// The depth of a schema counts the root as 0 and adds one per step into
// "items", "properties"/x, "anyOf"/i and "$defs"/x; the default maximum is
// [DefaultMaxDepth]. Its size is the number of UTF-8 bytes of its compact
// JSON text ([Schema.JSON]); the default maximum is [DefaultMaxBytes].
// String lengths ("minLength", "maxLength") count UTF-16 code units, as
// JavaScript does, so a schema means the same to a TypeScript peer.
//
// # Schemas as authored
//
// A model fills arguments in the order it is shown them, so a schema is
// shown as authored (semantics §10.8): [Parse] keeps the text it is given,
// byte for byte but for insignificant whitespace (and refuses a text whose
// meaning is not what it shows: invalid UTF-8, a key given twice in one
// object); [Infer] lists each struct's properties in field order.
// [Reduce] cuts bound fields out of a schema without reordering the rest.
//
// # Why our own validator
//
// The validator implements exactly the subset, in the keyword order of the
// reference implementation, with issue messages that never repeat the
// input (they are shown to agents). It needs no resolution step, compiles
// patterns once, and allocates nothing for a valid value: about 100 ns for
// {"ids":["a"]} and a few microseconds for a large input with formats and
// patterns, where a general-purpose validator needs microseconds and dozens
// of allocations for the small one. Formats are checked by hand with the
// semantics of these regular expressions:
//
//	date-time  ^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$
//	           (fields also in range, so that time.Time decoding succeeds)
//	date       ^\d{4}-\d{2}-\d{2}$
//	uuid       8-4-4-4-12 hexadecimal digits
//	email      ^[^\s@]+@[^\s@]+\.[^\s@]+$
//	uri        ^[a-zA-Z][a-zA-Z0-9+.-]*:
//
// Issue paths are JSON pointers (RFC 6901) into the value: "" for the
// root, "/ids/0" for the first element of member "ids".
//
// # Inference
//
// [Infer] and [For] derive a schema from a Go type with
// github.com/google/jsonschema-go and normalise it so that every value
// that validates decodes into the type with encoding/json (integer ranges,
// non-nullable slices, date-time strings for time.Time) once re-encoded
// from its decoded form. Decoding the original text instead can still fail
// where encoding/json is stricter than JSON: a number written 1.0 or 1e2
// for an integer field, duplicate member names, or a time.Time written
// with escapes.
//
// # Comparing schemas
//
// [Compare] classifies the change from an old to a new schema, as the
// contract drift gate needs: wider when the new schema may accept a value
// the old one refuses, narrower for the converse. It proves inclusions
// between the languages of the two schemas on the compiled nodes, so a
// keyword means to it exactly what it means to the validator. The proof
// follows $ref (assuming a pair of nodes under proof when a recursion
// meets it again, which a finite value makes sound), distributes anyOf,
// compares types (integer within number), the bounds and counts of
// strings, numbers, arrays and objects, required and declared properties
// and additionalProperties, and checks a finite set of values (const,
// enum, booleans and null) value by value with the validator. It is sound,
// not complete: a change it calls neither wider nor narrower is an
// equivalence.
//
// The schemas compared need not lie in the subset (a hand-edited contract
// file, the listing of an MCP server of another implementation). They are
// compiled with the subset's compiler in a mode that records, instead of
// refusing, what the subset does not model, and one rule applies: what
// the prover does not model never makes a change look safe. A keyword
// that can only restrict the values a schema accepts (not, allOf, oneOf,
// if/then/else, minProperties, a format it does not know, ...) is left out
// where that can only make the language larger and fails the proof where
// it would have to be shown; anything else — a keyword of no known
// vocabulary, patternProperties next to additionalProperties false,
// prefixItems next to items, a $ref beside other keywords under draft-07,
// an $id inside the document, a dialect other than draft 2020-12 and
// draft-07 — fails the proof on either side ("unproven"). Boolean
// subschemas are modeled: true accepts every value, false none.
//
// Each proof may do [ProofWork] steps, and a [Budget] bounds a run of
// comparisons; a proof that runs out is unproven, too complex.
//
// # Example
//
//	type SelectRows struct {
//		IDs []string `json:"ids" jsonschema:"Row ids to select"`
//	}
//	s, err := schema.For[SelectRows]()
//	if err != nil {
//		return err // *schema.Error: outside the subset
//	}
//	var v any
//	_ = json.Unmarshal(input, &v)
//	if issues := s.Validate(v); issues != nil {
//		return issues // [{path, message}]
//	}
package schema
