package schema

import (
	"reflect"
	"testing"
)

// BenchmarkValidateIDs validates the decoded input {"ids":["a"]} against
// the schema inferred from struct{ IDs []string `json:"ids"` }.
func BenchmarkValidateIDs(b *testing.B) {
	s, err := For[struct {
		IDs []string `json:"ids"`
	}]()
	if err != nil {
		b.Fatal(err)
	}
	v := decode(b, `{"ids":["a"]}`)
	b.ReportAllocs()
	for b.Loop() {
		if s.Validate(v) != nil {
			b.Fatal("invalid")
		}
	}
}

// typicalSchema is a ~1 kB tool input schema.
const typicalSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "description": "Filter, sort and select rows of the devices table",
  "properties": {
    "ids": {"type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 1, "maxItems": 100, "uniqueItems": true, "description": "Device ids"},
    "mode": {"enum": ["replace", "add", "remove"], "default": "replace"},
    "filter": {
      "type": "object",
      "properties": {
        "status": {"type": ["string", "null"], "enum": ["online", "offline", "retired", null]},
        "name": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9 _-]*$"},
        "seenAfter": {"type": "string", "format": "date-time"},
        "minBattery": {"type": "number", "minimum": 0, "maximum": 100}
      },
      "additionalProperties": false
    },
    "sort": {"$ref": "#/$defs/sort"},
    "page": {"type": "integer", "minimum": 1, "default": 1},
    "contact": {"type": "string", "format": "email"}
  },
  "required": ["ids"],
  "additionalProperties": false,
  "$defs": {
    "sort": {
      "anyOf": [
        {"type": "object", "properties": {"by": {"const": "name"}, "desc": {"type": "boolean"}}, "required": ["by"]},
        {"type": "object", "properties": {"by": {"const": "lastSeen"}, "desc": {"type": "boolean"}}, "required": ["by"]}
      ]
    }
  }
}`

// BenchmarkParse checks and compiles a typical ~1 kB schema.
func BenchmarkParse(b *testing.B) {
	raw := []byte(typicalSchema)
	if _, err := Parse(raw); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInferCached measures Infer for a type already inferred.
func BenchmarkInferCached(b *testing.B) {
	t := reflect.TypeFor[SelectRows]()
	if _, err := Infer(t); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Infer(t); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateTypical validates a typical input against
// typicalSchema.
func BenchmarkValidateTypical(b *testing.B) {
	s := mustParse(b, typicalSchema)
	v := decode(b, `{"ids":["123e4567-e89b-12d3-a456-426614174000","123e4567-e89b-12d3-a456-426614174001"],"mode":"add","filter":{"status":null,"name":"lab 1","seenAfter":"2024-01-02T03:04:05Z"},"sort":{"by":"lastSeen","desc":true},"page":2}`)
	if issues := s.Validate(v); issues != nil {
		b.Fatal(issues)
	}
	b.ReportAllocs()
	for b.Loop() {
		if s.Validate(v) != nil {
			b.Fatal("invalid")
		}
	}
}
