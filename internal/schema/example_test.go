package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentsurface/agentsurface/internal/schema"
)

func ExampleFor() {
	type SelectRows struct {
		IDs  []string `json:"ids" jsonschema:"Row ids to select"`
		Mode string   `json:"mode,omitempty"`
	}
	s, err := schema.For[SelectRows]()
	if err != nil {
		panic(err)
	}
	fmt.Println(s.JSON())

	var v any
	_ = json.Unmarshal([]byte(`{"ids":["a",7],"extra":true}`), &v)
	for _, is := range s.Validate(v) {
		fmt.Printf("%q: %s\n", is.Path, is.Message)
	}
	// Output:
	// {"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"description":"Row ids to select"},"mode":{"type":"string"}},"required":["ids"],"additionalProperties":false}
	// "ids[1]": expected string
	// "extra": unexpected property
}

func ExampleParse() {
	_, err := schema.Parse([]byte(`{"type":"object","properties":{"n":{"oneOf":[{"type":"integer"}]}}}`))
	var se *schema.Error
	if errors.As(err, &se) {
		fmt.Printf("keyword %s at %s\n", se.Keyword, se.Path)
	}
	// Output:
	// keyword oneOf at /properties/n/oneOf
}
