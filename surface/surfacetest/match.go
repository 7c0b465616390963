package surfacetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// listing is one capability as a snapshot lists it.
type listing struct {
	kind              surface.Kind
	instanceID        string // the component's, or a procedure reference's context instance
	registrationID    string
	available         bool
	unavailableReason string
}

// listings returns the capabilities of snap with the given id, offered by
// the instance when one is given (a procedure reference is offered by its
// context's instance, as at invocation).
func listings(snap surface.Snapshot, capabilityID, instanceID string) []listing {
	var out []listing
	for _, c := range snap.Components {
		if instanceID != "" && c.InstanceID != instanceID {
			continue
		}
		for _, o := range c.Observations {
			if o.CapabilityID == capabilityID {
				out = append(out, listing{surface.KindObservation, c.InstanceID, c.RegistrationID, o.Available, o.UnavailableReason})
			}
		}
		for _, a := range c.Actions {
			if a.CapabilityID == capabilityID {
				out = append(out, listing{surface.KindAction, c.InstanceID, c.RegistrationID, a.Available, a.UnavailableReason})
			}
		}
	}
	for _, p := range snap.Procedures {
		instance := ""
		if p.Context != nil {
			instance = p.Context.InstanceID
		}
		if p.ProcedureID == capabilityID && (instanceID == "" || instance == instanceID) {
			out = append(out, listing{surface.KindProcedure, instance, p.RegistrationID, p.Available, p.UnavailableReason})
		}
	}
	return out
}

// describe names a capability and, if given, its instance, for messages.
func describe(capabilityID, instanceID string) string {
	if instanceID == "" {
		return capabilityID
	}
	return capabilityID + " (instance " + instanceID + ")"
}

// RequireExposed fails the test unless src's snapshot lists capabilityID
// as available, on the given instance or, for "", on any. A hidden
// capability (absent from the snapshot) and a listed but unavailable one
// both fail, with messages that tell them apart: for an agent, hidden and
// unavailable are different answers.
func RequireExposed(tb testing.TB, src Snapshotter, capabilityID, instanceID string) {
	tb.Helper()
	found := listings(src.Snapshot(surface.SnapshotOptions{}), capabilityID, instanceID)
	if len(found) == 0 {
		tb.Fatalf("%s is not exposed: absent from the snapshot (hidden or not registered)", describe(capabilityID, instanceID))
	}
	if !slices.ContainsFunc(found, func(l listing) bool { return l.available }) {
		tb.Fatalf("%s is listed but unavailable (%s), want available", describe(capabilityID, instanceID), found[0].unavailableReason)
	}
}

// RequireExposedUnavailable fails the test unless src's snapshot lists
// capabilityID as unavailable (visible, not hidden), on the given instance
// or, for "", on any, and, if reason is not "", with that unavailable
// reason.
func RequireExposedUnavailable(tb testing.TB, src Snapshotter, capabilityID, instanceID, reason string) {
	tb.Helper()
	found := listings(src.Snapshot(surface.SnapshotOptions{}), capabilityID, instanceID)
	if len(found) == 0 {
		tb.Fatalf("%s is not listed: absent from the snapshot (hidden or not registered), want listed unavailable", describe(capabilityID, instanceID))
	}
	var reasons []string
	for _, l := range found {
		if !l.available {
			if reason == "" || l.unavailableReason == reason {
				return
			}
			reasons = append(reasons, fmt.Sprintf("%q", l.unavailableReason))
		}
	}
	if len(reasons) == 0 {
		tb.Fatalf("%s is available, want listed unavailable", describe(capabilityID, instanceID))
	}
	tb.Fatalf("%s is unavailable with reason %s, want %q", describe(capabilityID, instanceID), strings.Join(reasons, ", "), reason)
}

// RequireFailWith fails the test unless res failed with code and its error
// details include each key of details with an equal value, and returns the
// error. Values are compared as JSON values, as an agent reads them: the
// expected []string{"a"} equals a detail holding []any{"a"}, 3 equals 3.0,
// and a struct equals the object it encodes to. Details not named are not
// checked; a nil details checks the code only.
func RequireFailWith(tb testing.TB, res surface.Result, code surface.Code, details map[string]any) *surface.Error {
	tb.Helper()
	if res.Status != surface.StatusError || res.Error == nil {
		b, _ := json.Marshal(res)
		tb.Fatalf("want error %s, got %s", code, b)
	}
	if res.Error.Code != code {
		b, _ := json.Marshal(res.Error)
		tb.Fatalf("want error %s, got %s", code, b)
	}
	// The details as an agent reads them: from the error's JSON.
	var wire struct {
		Values map[string]json.RawMessage `json:"details"`
	}
	if b, err := json.Marshal(res.Error); err != nil || json.Unmarshal(b, &wire) != nil {
		tb.Fatalf("error %s does not encode as JSON: %v", code, err)
	}
	for _, key := range slices.Sorted(maps.Keys(details)) {
		got, ok := wire.Values[key]
		if !ok {
			b, _ := json.Marshal(res.Error)
			tb.Fatalf("error %s has no details.%s; got %s", code, key, b)
		}
		equal, gotJSON, wantJSON, err := jsonEqual(got, details[key])
		if err != nil {
			tb.Fatalf("details.%s: %v", key, err)
		}
		if !equal {
			tb.Fatalf("error %s: details.%s = %s, want %s", code, key, gotJSON, wantJSON)
		}
	}
	return res.Error
}

// jsonEqual reports whether a and b encode to the same JSON value, and
// returns their encodings.
func jsonEqual(a, b any) (equal bool, aJSON, bJSON []byte, err error) {
	if aJSON, err = json.Marshal(a); err != nil {
		return false, nil, nil, err
	}
	if bJSON, err = json.Marshal(b); err != nil {
		return false, nil, nil, err
	}
	var av, bv any
	if err := json.Unmarshal(aJSON, &av); err != nil {
		return false, nil, nil, err
	}
	if err := json.Unmarshal(bJSON, &bv); err != nil {
		return false, nil, nil, err
	}
	return reflect.DeepEqual(av, bv), aJSON, bJSON, nil
}
