package contract

import (
	"encoding/json"
	"testing"
)

// The prover's own cases are in internal/schema (include_test.go); here,
// what the contract adds: an absent schema compares as its default, and
// no input is the empty object.
func TestCompareSchemasDefault(t *testing.T) {
	if d := compareSchemas(nil, json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`), emptyObjectSchema, nil); !d.wider || d.narrower {
		t.Fatalf("%+v", d)
	}
	if d := compareSchemas(nil, json.RawMessage(emptyObjectSchema), emptyObjectSchema, nil); d.wider || d.narrower {
		t.Fatalf("%+v", d)
	}
	// An absent output schema is any value.
	if d := compareSchemas(json.RawMessage(`{"type":"object"}`), nil, json.RawMessage(`{}`), nil); !d.wider || d.narrower {
		t.Fatalf("%+v", d)
	}
}
