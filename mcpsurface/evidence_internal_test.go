package mcpsurface

import (
	"encoding/json"
	"fmt"
	"testing"
)

// The memory of issued confirmations is bounded, oldest out, and keeps
// the by-call index consistent.
func TestEvidenceBound(t *testing.T) {
	var e evidence
	for i := range maxIssued + 10 {
		e.add(&issued{confirmationID: fmt.Sprint("c", i), key: fmt.Sprint("k", i)})
	}
	if len(e.order) != maxIssued || len(e.ids) != maxIssued || len(e.calls) != maxIssued {
		t.Fatalf("%d %d %d", len(e.order), len(e.ids), len(e.calls))
	}
	if e.byID("c9") != nil || e.byID("c10") == nil || e.calls["k9"] != nil || e.calls[fmt.Sprint("k", maxIssued+9)] == nil {
		t.Fatal("not oldest out")
	}
	// A newer record for the same call replaces the index entry; dropping
	// the older one keeps it.
	old := e.byID("c10")
	e.add(&issued{confirmationID: "new", key: old.key})
	if e.calls[old.key].confirmationID != "new" {
		t.Fatal("index not replaced")
	}
	e.settled(old, "3")
	if e.calls[old.key] == nil || old.evidenceVersion != "3" {
		t.Fatal("settling an older record dropped the newer index entry")
	}
}

// Arguments are keyed canonically: key order, spacing and absent vs empty
// do not matter.
func TestCallKey(t *testing.T) {
	same := [][2]string{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1.0 }`},
		{``, `{}`},
		{`null`, `{}`},
	}
	for _, c := range same {
		if callKey("t", json.RawMessage(c[0])) != callKey("t", json.RawMessage(c[1])) {
			t.Errorf("%s vs %s", c[0], c[1])
		}
	}
	if callKey("t", json.RawMessage(`{"a":1}`)) == callKey("t", json.RawMessage(`{"a":2}`)) ||
		callKey("t", json.RawMessage(`{}`)) == callKey("u", json.RawMessage(`{}`)) {
		t.Fatal("distinct calls share a key")
	}
	if got := string(withFields(json.RawMessage(`{"input":{"x":1},"confirmationId":"mine"}`), map[string]string{"confirmationId": "c", "invocationId": "i"})); got != `{"confirmationId":"mine","input":{"x":1},"invocationId":"i"}` {
		t.Fatal(got)
	}
}
