package mcpsurface

import (
	"encoding/json"
	"testing"
)

// Arguments are digested canonically (the request state binds them): key
// order, spacing and absent vs empty do not matter; withFields adds a
// field only where it is absent.
func TestCanonicalArgs(t *testing.T) {
	same := [][2]string{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1.0 }`},
		{``, `{}`},
		{`null`, `{}`},
	}
	for _, c := range same {
		if argsDigest(json.RawMessage(c[0])) != argsDigest(json.RawMessage(c[1])) {
			t.Errorf("%s vs %s", c[0], c[1])
		}
	}
	if argsDigest(json.RawMessage(`{"a":1}`)) == argsDigest(json.RawMessage(`{"a":2}`)) {
		t.Fatal("distinct arguments share a digest")
	}
	if got := string(withFields(json.RawMessage(`{"input":{"x":1},"confirmationId":"mine"}`), map[string]string{"confirmationId": "c", "invocationId": "i"})); got != `{"confirmationId":"mine","input":{"x":1},"invocationId":"i"}` {
		t.Fatal(got)
	}
}
