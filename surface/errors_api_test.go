package surface_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// Adapters read an error's variant and confirmation id through typed
// accessors, and build the variants the registry defines with its
// constructors, which give them the variant's retry category.
// AS-ERR-001.
func TestErrorAccessorsAndVariants_AS_ERR_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "vault", Description: "Vault", Actions: map[string]surface.Capability{
		"open": surface.Action(surface.ActionDef[surface.None, surface.None]{Description: "Opens", Effect: surface.EffectLocalState,
			Confirmation: surface.ConfirmRequired,
			Execute:      func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil }}),
	}})
	res := reg.Invoke(bg, surface.Invocation{CapabilityID: "view:vault.open"}, as("a"))
	e := surfacetest.RequireCode(t, res, surface.CodeConfirmationRequired)
	if cid := e.ConfirmationID(); cid == "" || cid != e.Details["confirmationId"] || e.Reason() != "" {
		t.Fatalf("confirmation id %q, reason %q of %+v", cid, e.Reason(), e)
	}
	reg.Confirmations().Resolve(e.ConfirmationID(), surface.Resolution{Approved: false})
	denied := surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:vault.open", ConfirmationID: e.ConfirmationID()}, as("a")),
		surface.CodeConfirmationInvalid)
	if denied.Reason() != surface.ReasonDenied || denied.ConfirmationID() != "" {
		t.Fatalf("%+v", denied)
	}
	// The constructors make what the registry makes, byte for byte.
	made := surface.NewReasonError(surface.CodeConfirmationInvalid, surface.ReasonDenied, "")
	if a, b := marshal(t, made), marshal(t, denied); a != b {
		t.Fatalf("NewReasonError %s, registry %s", a, b)
	}
	for _, c := range []struct {
		code   surface.Code
		reason surface.Reason
		retry  surface.Retry
	}{
		{surface.CodeConfirmationInvalid, surface.ReasonExpired, surface.RetryWithConfirmation},
		{surface.CodeConfirmationInvalid, surface.ReasonMismatch, surface.RetryNo},
		{surface.CodePreconditionFailed, surface.ReasonBindingFailed, surface.RetryAfterRefresh},
		{surface.CodeExecutionFailed, surface.ReasonHandlerError, surface.RetryNo},
		{surface.CodeStaleCapability, surface.ReasonSurfaceReloaded, surface.RetryAfterRefresh},
	} {
		e := surface.NewReasonError(c.code, c.reason, "")
		if e.Retry != c.retry || e.Reason() != c.reason || e.Message == "" {
			t.Errorf("%s %s: %+v", c.code, c.reason, e)
		}
	}
	closed := surface.NewClosedError("")
	if closed.Code != surface.CodeCancelled || closed.Retry != surface.RetryNo || closed.Message != "The surface was closed." {
		t.Fatalf("%+v", closed)
	}
	_ = reg.Close()
	if a, b := marshal(t, closed), marshal(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "view:vault.open"}, as("a")).Error); a != b {
		t.Fatalf("NewClosedError %s, registry %s", a, b)
	}
	var nilErr *surface.Error
	if nilErr.Reason() != "" || nilErr.ConfirmationID() != "" {
		t.Fatal("a nil *Error has no reason or confirmation id")
	}
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
