package surface_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// FuzzIdentity sends requests with ids and inputs of any length and
// content to a registry whose input limit is 64 bytes. The identity phase
// must refuse exactly the requests with an id longer than MaxIDLength or
// an input longer than the limit: an over-long capability or instance id
// (checked first, in request order) as CAPABILITY_NOT_FOUND, any other as
// INVALID_INPUT with details.field naming it; and a refusal must leave no
// audit record and no event. A request within the limits is never refused
// that way. AS-ID-001.
func FuzzIdentity(f *testing.F) {
	const limit = 64
	sink := surface.NewMemorySink(0)
	reg := surfacetest.NewRegistry(f, &surface.Options{Audit: sink, Limits: surface.Limits{MaxInputBytes: limit}})
	h := surfacetest.MustRegister(f, reg, anyEcho())
	rec := surfacetest.Record(f, reg)
	long := strings.Repeat("x", surface.MaxIDLength+1)
	for _, s := range [][6]string{
		{"view:free.echo", "", "", "@live", "", ""},
		{"view:free.echo", "default", "call-1", "@live", "", "1"},
		{"view:" + long, "", "", "", "", ""},
		{"view:free.echo", long, "", "", "", ""},
		{"view:free.echo", "", long, "", "", ""},
		{"view:free.echo", "", "", long, "", ""},
		{"view:free.echo", "", "", "", long, ""},
		{"view:free.echo", "", "", "", "", long},
		{long, long, long, long, long, long},
		{"domain:a.b", "\xff", "😀", "", "cnf_x", "99999999999999999999999"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], []byte(`{"a":1}`))
	}
	f.Add("view:free.echo", "", "", "@live", "", "", []byte(`{"a":"`+strings.Repeat("y", limit)+`"}`))
	f.Add("view:free.echo", "", "", "@live", "", "", []byte(strings.Repeat("[", 2000)))

	f.Fuzz(func(t *testing.T, capID, instance, invID, regID, cnfID, version string, input []byte) {
		if regID == "@live" {
			regID = h.ID()
		}
		inv := surface.Invocation{CapabilityID: capID, InstanceID: instance, InvocationID: invID,
			RegistrationID: regID, ConfirmationID: cnfID, SurfaceVersion: version}
		if len(input) > 0 {
			inv.Input = json.RawMessage(input)
		}
		audits, events := len(sink.Events()), len(rec.Events())
		res := reg.Invoke(bg, inv, as("fuzz"))

		// What the identity phase must say, in the order it checks.
		var field string
		for _, c := range []struct{ name, id string }{
			{"capabilityId", capID}, {"instanceId", instance}, {"invocationId", invID},
			{"registrationId", regID}, {"confirmationId", cnfID}, {"surfaceVersion", version},
		} {
			if len(c.id) > surface.MaxIDLength {
				field = c.name
				break
			}
		}
		if field == "" && len(input) > limit {
			field = "input"
		}

		refused := res.Error != nil && res.Error.Details["field"] != nil
		switch {
		case field == "capabilityId" || field == "instanceId":
			if res.Error == nil || res.Error.Code != surface.CodeCapabilityNotFound {
				t.Fatalf("%s too long: got %v", field, res.Error)
			}
		case field != "":
			if !refused || res.Error.Code != surface.CodeInvalidInput || res.Error.Details["field"] != field {
				t.Fatalf("%s too long: got %v", field, res.Error)
			}
			// A fixed message: nothing of the request is echoed.
			want := field + " is longer than 128 bytes."
			if field == "input" {
				want = "input is larger than the limit of 64 bytes"
			}
			if issues, _ := res.Error.Details["issues"].([]surface.Issue); len(issues) != 1 || issues[0].Message != want {
				t.Fatalf("%s: issues %+v", field, issues)
			}
		case refused:
			t.Fatalf("a request within the limits was refused: %v", res.Error)
		}
		if field != "" {
			if n := len(sink.Events()); n != audits {
				t.Fatalf("a refused request left %d audit records", n-audits)
			}
			if n := len(rec.Events()); n != events {
				t.Fatalf("a refused request emitted %d events", n-events)
			}
		}
		if res.CapabilityID != capID || invID != "" && res.InvocationID != invID {
			t.Fatalf("the result does not echo the request: %q %q", res.CapabilityID, res.InvocationID)
		}
	})
}
