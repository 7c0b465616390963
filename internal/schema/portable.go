package schema

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Portable schemas.
//
// Clients map tool schemas onto narrower dialects (the OpenAPI subset of
// some model providers has a single "type" per schema and no schema that
// accepts anything), and the MCP Inspector's --strict lint warns about
// the two constructs of the subset they cannot map: a "type" array
// (["array", "null"], which Infer writes for Go slices and maps a program
// may leave nil) and a schema that constrains nothing ({} or one with
// annotations only). Portable rewrites both into equivalent forms.

// anyJSON is a schema every JSON value validates against, with a type
// per branch (integers are numbers).
var anyJSON = json.RawMessage(`[{"type":"object"},{"type":"array"},{"type":"string"},{"type":"number"},{"type":"boolean"},{"type":"null"}]`)

// Portable returns a schema of the subset in the form clients map most
// widely, valid for exactly the same values: in every schema (the root,
// "properties", "items", "anyOf" and "$defs"),
//
//   - a "type" array becomes "anyOf" of one schema per type, in the
//     array's order ({"anyOf": [{"type": "array"}, {"type": "null"}]}),
//     where "type" was; a schema that already has "anyOf" becomes instead
//     the "anyOf" of one copy of itself per type (its annotations and, at
//     the root, "$defs", "$schema" and "$id" stay outside);
//   - a schema that constrains nothing gets "anyOf" of the JSON types.
//
// The other keys keep their order and text. A schema with nothing to
// rewrite is returned as it is (the same slice), and so is a text that
// is not a JSON object.
func Portable(schema []byte) []byte {
	out, changed := portableNode(schema, true)
	if !changed {
		return schema
	}
	return out
}

// newMember is a member written by this package.
func newMember(key string, val []byte) member {
	return member{key: key, rawKey: jsonString(key), val: val}
}

// jsonString is the JSON text of s, without HTML escaping.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// portableNode rewrites one schema and those inside it; changed reports
// whether anything was rewritten. root is set for the document's root.
func portableNode(raw []byte, root bool) (out []byte, changed bool) {
	ms, err := objectMembers(raw)
	if err != nil {
		return raw, false
	}
	for i := range ms {
		var v []byte
		var c bool
		switch ms[i].key {
		case "properties":
			v, c = portableMap(ms[i].val)
		case "$defs":
			if root {
				v, c = portableMap(ms[i].val)
			}
		case "items":
			v, c = portableNode(ms[i].val, false)
		case "anyOf":
			v, c = portableList(ms[i].val)
		}
		if c {
			ms[i].val, changed = v, true
		}
	}
	if t := slices.IndexFunc(ms, func(m member) bool { return m.key == "type" }); t >= 0 {
		var types []string
		if json.Unmarshal(ms[t].val, &types) == nil {
			types = distinct(types)
			switch {
			case len(types) == 1:
				ms[t].val, changed = jsonString(types[0]), true
			case len(types) > 1 && !slices.ContainsFunc(ms, func(m member) bool { return m.key == "anyOf" }):
				ms[t], changed = newMember("anyOf", typeBranches(types, nil)), true
			case len(types) > 1:
				return splitByType(ms, types, root), true
			}
		}
	}
	if !slices.ContainsFunc(ms, func(m member) bool { return constraining[m.key] }) {
		ms, changed = append(ms, newMember("anyOf", anyJSON)), true
	}
	if !changed {
		return raw, false
	}
	return appendObject(nil, ms), true
}

// portableMap rewrites the schemas of an object of schemas
// ("properties", "$defs").
func portableMap(raw []byte) ([]byte, bool) {
	ms, err := objectMembers(raw)
	if err != nil {
		return raw, false
	}
	changed := false
	for i := range ms {
		if v, c := portableNode(ms[i].val, false); c {
			ms[i].val, changed = v, true
		}
	}
	if !changed {
		return raw, false
	}
	return appendObject(nil, ms), true
}

// portableList rewrites the schemas of an array of schemas ("anyOf").
func portableList(raw []byte) ([]byte, bool) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return raw, false
	}
	changed := false
	for i := range list {
		if v, c := portableNode(list[i], false); c {
			list[i], changed = v, true
		}
	}
	if !changed {
		return raw, false
	}
	return encodeList(list), true
}

func encodeList(list []json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(v)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// typeBranches is the "anyOf" of one schema per type, each with the
// members rest after its "type".
func typeBranches(types []string, rest []member) []byte {
	list := make([]json.RawMessage, len(types))
	for i, t := range types {
		list[i] = appendObject(nil, append([]member{newMember("type", jsonString(t))}, rest...))
	}
	return encodeList(list)
}

// splitByType is the schema ms, which has a "type" array of types and
// "anyOf", as the "anyOf" of one copy of itself per type. Annotations
// (and at the root the document's keys) stay outside the copies.
func splitByType(ms []member, types []string, root bool) []byte {
	var outer, inner []member
	for _, m := range ms {
		switch {
		case m.key == "type":
		case annotation[m.key], root && (m.key == "$defs" || m.key == "$schema" || m.key == "$id"):
			outer = append(outer, m)
		default:
			inner = append(inner, m)
		}
	}
	return appendObject(nil, append(outer, newMember("anyOf", typeBranches(types, inner))))
}

// distinct returns types without repetitions, in order.
func distinct(types []string) []string {
	var out []string
	for _, t := range types {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// annotation are the keywords that say something about a schema without
// constraining its values.
var annotation = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$comment": true,
}

// constraining are the keywords that constrain a value: a schema without
// any accepts every value. (As the MCP Inspector's lint counts them;
// if/then/else constrain only as a pair, which the subset has not.)
var constraining = map[string]bool{
	"type": true, "enum": true, "const": true, "multipleOf": true, "maximum": true, "exclusiveMaximum": true,
	"minimum": true, "exclusiveMinimum": true, "maxLength": true, "minLength": true, "pattern": true, "format": true,
	"contentMediaType": true, "contentEncoding": true, "contentSchema": true, "maxItems": true, "minItems": true,
	"uniqueItems": true, "maxContains": true, "minContains": true, "maxProperties": true, "minProperties": true,
	"required": true, "dependentRequired": true, "allOf": true, "anyOf": true, "oneOf": true, "not": true,
	"items": true, "prefixItems": true, "contains": true, "additionalItems": true, "unevaluatedItems": true,
	"properties": true, "patternProperties": true, "additionalProperties": true, "unevaluatedProperties": true,
	"propertyNames": true, "dependentSchemas": true, "dependencies": true, "$ref": true, "$dynamicRef": true,
	"$recursiveRef": true,
}
