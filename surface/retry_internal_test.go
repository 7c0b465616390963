package surface

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// The memory of asked confirmations is bounded, oldest out, keeps its two
// indexes consistent, forgets what expired, and keeps each client's
// records apart.
func TestRetriesBound(t *testing.T) {
	var m retries
	now := time.Unix(1000, 0)
	later := now.Add(time.Hour)
	for i := range maxAsked + 10 {
		m.add(&asked{client: "a", confirmationID: fmt.Sprint("c", i), key: fmt.Sprint("k", i), expires: later}, now)
	}
	if len(m.order) != maxAsked || len(m.ids) != maxAsked || len(m.calls) != maxAsked {
		t.Fatalf("%d %d %d", len(m.order), len(m.ids), len(m.calls))
	}
	if m.byID("a", "c9", now) != nil || m.byID("a", "c10", now) == nil || m.calls[askedKey{"a", "k9"}] != nil ||
		m.calls[askedKey{"a", fmt.Sprint("k", maxAsked+9)}] == nil {
		t.Fatal("not oldest out")
	}
	// Another client knows none of them.
	if m.byID("b", "c11", now) != nil || m.calls[askedKey{"b", "k11"}] != nil {
		t.Fatal("a record crossed clients")
	}
	// A newer record for the same call replaces the call's index entry;
	// settling the older one keeps it.
	old := m.byID("a", "c11", now)
	m.add(&asked{client: "a", confirmationID: "new", key: old.key, expires: later}, now)
	if m.calls[askedKey{"a", old.key}].confirmationID != "new" {
		t.Fatal("index not replaced")
	}
	m.settled(old, later.Add(time.Hour))
	if m.calls[askedKey{"a", old.key}] == nil || !old.expires.Equal(later.Add(time.Hour)) {
		t.Fatal("settling an older record dropped the newer index entry")
	}
	// Settling never shortens a record's life.
	m.settled(old, now)
	if !old.expires.Equal(later.Add(time.Hour)) {
		t.Fatal("settled shortened the record's life")
	}
	// Expired records are not found, and the next add drops them.
	if m.byID("a", "c12", later) != nil || m.byID("a", "c11", later) != old {
		t.Fatal("expiry")
	}
	m.add(&asked{client: "a", confirmationID: "last", key: "kl", expires: later.Add(time.Minute)}, later)
	if len(m.order) != 2 || len(m.ids) != 2 || len(m.calls) != 1 { // old (settled, no call entry) and last
		t.Fatalf("%d %d %d", len(m.order), len(m.ids), len(m.calls))
	}
}

// A known, live record of a client's confirmation is not replaced by a
// second add; an expired one is.
func TestRetriesAddKeepsKnown(t *testing.T) {
	var m retries
	now := time.Unix(1000, 0)
	first := &asked{client: "a", confirmationID: "c", key: "k1", expires: now.Add(time.Minute)}
	m.add(first, now)
	m.add(&asked{client: "a", confirmationID: "c", key: "k2", expires: now.Add(time.Hour)}, now)
	if m.byID("a", "c", now) != first || len(m.order) != 1 {
		t.Fatal("a known record was replaced")
	}
	then := now.Add(2 * time.Minute)
	second := &asked{client: "a", confirmationID: "c", key: "k2", expires: then.Add(time.Minute)}
	m.add(second, then)
	if m.byID("a", "c", then) != second || len(m.order) != 1 || m.calls[askedKey{"a", "k1"}] != nil {
		t.Fatal("an expired record was kept")
	}
}

// Calls are keyed canonically: key order, spacing and absent vs empty do
// not matter; the tool does.
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
		callKey("t", json.RawMessage(`{}`)) == callKey("u", json.RawMessage(`{}`)) ||
		callKey("t", json.RawMessage(`{x`)) == callKey("t", json.RawMessage(`{}`)) {
		t.Fatal("distinct calls share a key")
	}
}
