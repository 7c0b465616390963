// Package canonical implements the canonical JSON encoding and the fnv1a64
// hash that agentsurface uses for request fingerprints, confirmation digests
// and dedupe keys, byte-for-byte compatible with the TypeScript reference
// implementation (semantics.md §5), so that digests computed by a Go runtime
// and by a JavaScript one agree.
//
// # Canonical JSON
//
// The canonical encoding of a value is JSON.stringify of the value with
// object keys sorted, under JavaScript's data model:
//
//   - null (and a nil Go value) encodes as null; an absent object member is
//     dropped (in Go: a key that is not in the map; Go maps have no
//     undefined).
//   - Every number is a double. Integers and json.Number values are rounded
//     to the nearest double, as JSON.parse does (2^53+1 encodes as
//     9007199254740992). The text is ECMAScript's Number::toString: the
//     shortest decimal that round-trips, in exponent form only below 1e-6
//     or from 1e21 (1e-7, 1.5e-7, 1e+21), -0 as 0, 1.0 as 1. NaN and
//     ±Infinity are errors.
//   - Strings escape only '"', '\\', the code units below U+0020 (as \b \f
//     \n \r \t or lowercase \u00xx). '<', '>', '&', U+007F, U+2028, U+2029
//     and everything else are written raw, as UTF-8. An invalid UTF-8 byte
//     in a Go string stands for U+FFFD, as in encoding/json.
//   - Arrays keep their order. Object members are sorted by their keys'
//     UTF-16 code units, which is JavaScript's string order; it differs from
//     UTF-8 (and code point) order for supplementary characters, whose
//     surrogates D800–DFFF sort before U+E000–U+FFFF: "😀" < "\uFFFD".
//   - There is no whitespace.
//
// [Marshal] and [Append] encode Go values; [Canonicalize] re-encodes JSON
// text without building a tree of Go values, which is what request
// fingerprinting needs on every invocation.
//
// # fnv1a64
//
// [FNV1a64] is 64-bit FNV-1a over UTF-16 code units (not UTF-8 bytes), as the
// reference computes it on JavaScript strings; [Hex] prints a hash as 16
// lowercase hex digits and [Digest] combines the three:
//
//	fp, err := canonical.Digest(map[string]any{
//		"capabilityId":   "view:devices.table.selectRows",
//		"input":          map[string]any{"ids": []any{"d1"}, "mode": "replace"},
//		"instanceId":     nil,
//		"registrationId": nil,
//		"surfaceVersion": nil,
//		"confirmationId": nil,
//	})
//	// fp == "d07828fbd19f720e", err == nil
//
// # Why not encoding/json
//
// encoding/json escapes '<', '>', '&', U+2028 and U+2029, sorts map keys by
// UTF-8 bytes, keeps integer and json.Number text beyond double precision,
// and has no notion of UTF-16. Its float64 formatting, however, is exactly
// ECMAScript's and is reproduced here. (encoding/json/jsontext, which has an
// RFC 8785 canonicaliser, is still behind GOEXPERIMENT in Go 1.26.) Values of types this package does not know
// are still passed through encoding/json first, so struct tags and
// json.Marshaler implementations apply, and the result is then
// canonicalised.
//
// # Divergence on lone surrogates
//
// JavaScript strings can hold lone surrogates, which JSON.stringify writes as
// \udxxx escapes. Go strings cannot: a lone surrogate escape in JSON text
// (such as "\ud800") is read as U+FFFD, exactly as encoding/json decodes it,
// so [Canonicalize] of a text and [Marshal] of what encoding/json decodes
// from it always agree.
package canonical
