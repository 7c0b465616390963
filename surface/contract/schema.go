package contract

import (
	"bytes"
	"encoding/json"

	"github.com/agentsurface/agentsurface/internal/schema"
)

// A schema change is classified by the inclusion prover of the schema
// subset (schema.Compare), which works on compiled schemas: a keyword
// means to it what it means to the validator, and whatever it does not
// model never makes a change look safe.

// schemaDiff is the outcome of comparing an old and a new schema.
type schemaDiff struct {
	// wider: the new schema may accept a value the old one refuses
	// (reason says where); narrower: the converse.
	wider, narrower bool
	whyWider        string
	whyNarrower     string
}

// emptyObjectSchema is the input of a capability that takes none: the
// empty object only.
var emptyObjectSchema = json.RawMessage(`{"additionalProperties":false,"properties":{},"type":"object"}`)

// compareSchemas compares two schema texts; nil stands for def. budget
// bounds the work of a run of comparisons (nil: each comparison is
// bounded alone).
func compareSchemas(old, new, def json.RawMessage, budget *schema.Budget) schemaDiff {
	if old == nil {
		old = def
	}
	if new == nil {
		new = def
	}
	if bytes.Equal(old, new) {
		return schemaDiff{}
	}
	d := schema.Compare(old, new, budget)
	return schemaDiff{wider: d.Wider, narrower: d.Narrower, whyWider: d.WhyWider, whyNarrower: d.WhyNarrower}
}
