package surface_test

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// accessed is everything the accessors of an *Error return.
type accessed struct {
	Reason             surface.Reason
	ConfirmationID     string
	Summary            string
	Effect             surface.Effect
	Origin             surface.Origin
	LiveRegistrationID string
	ExpiresAt          time.Time
	RetryAfter         time.Duration
	Issues             []surface.Issue
	LockedFields       []string
	Instances          []surface.InstanceRef
	ApproveURL         string
}

func access(e *surface.Error) accessed {
	return accessed{
		Reason: e.Reason(), ConfirmationID: e.ConfirmationID(), Summary: e.Summary(), Effect: e.Effect(),
		Origin: e.Origin(), LiveRegistrationID: e.LiveRegistrationID(), ExpiresAt: e.ExpiresAt(),
		RetryAfter: e.RetryAfter(), Issues: e.Issues(), LockedFields: e.LockedFields(), Instances: e.Instances(),
		ApproveURL: e.ApproveURL(),
	}
}

// overWire returns e as a client that received it as JSON holds it.
func overWire(t interface {
	Helper()
	Fatalf(string, ...any)
}, e *surface.Error) *surface.Error {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("marshal %#v: %v", e, err)
	}
	var d surface.Error
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return &d
}

// Property: every accessor returns the same value for an error made in
// process and for that error after a JSON round trip, whatever its
// details hold — the registry's forms, a client's, or junk of the wrong
// shape. AS-ERR-001.
func TestErrorAccessorsSameOverTheWire_AS_ERR_001(t *testing.T) {
	text := rapid.OneOf(rapid.StringMatching(`[a-z_-]{0,12}`), rapid.String())
	junk := rapid.OneOf[any](
		rapid.Just[any](nil), rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Float64Range(-1e6, 1e6), func(f float64) any { return f }),
		rapid.Map(text, func(s string) any { return s }),
		rapid.Just[any](map[string]any{"path": 1.0}),
		rapid.Just[any]([]any{"x", 2.0}),
		rapid.Just[any]([]any{map[string]any{"path": "a", "message": 3.0}}),
		rapid.Just[any]([]any{}),
	)
	parent := rapid.Custom(func(t *rapid.T) *surface.Parent {
		if !rapid.Bool().Draw(t, "hasParent") {
			return nil
		}
		return &surface.Parent{Type: text.Draw(t, "parentType"), InstanceID: text.Draw(t, "parentInstance")}
	})
	issue := rapid.Custom(func(t *rapid.T) surface.Issue {
		return surface.Issue{Path: text.Draw(t, "path"), Message: text.Draw(t, "message")}
	})
	ref := rapid.Custom(func(t *rapid.T) surface.InstanceRef {
		return surface.InstanceRef{InstanceID: text.Draw(t, "instanceId"), RegistrationID: text.Draw(t, "registrationId"),
			Description: text.Draw(t, "description"), Context: parent.Draw(t, "context")}
	})
	// Each key: the forms a registry, a policy, a handler or httpexec put
	// there, or junk.
	forms := map[string]*rapid.Generator[any]{
		"reason": rapid.OneOf(
			rapid.Map(text, func(s string) any { return s }),
			rapid.Map(text, func(s string) any { return surface.Reason(s) })),
		"confirmationId":     rapid.Map(text, func(s string) any { return s }),
		"summary":            rapid.Map(text, func(s string) any { return s }),
		"liveRegistrationId": rapid.Map(text, func(s string) any { return s }),
		"approveUrl":         rapid.Map(text, func(s string) any { return s }),
		"effect": rapid.OneOf(
			rapid.Map(text, func(s string) any { return s }),
			rapid.Map(rapid.SampledFrom([]surface.Effect{surface.EffectLocalState, surface.EffectDestructive}), func(e surface.Effect) any { return e })),
		"origin": rapid.OneOf(
			rapid.Map(rapid.SampledFrom([]string{"client", "server"}), func(s string) any { return s }),
			rapid.Map(rapid.SampledFrom([]surface.Origin{surface.OriginClient, surface.OriginServer}), func(o surface.Origin) any { return o })),
		"expiresAt": rapid.OneOf(
			rapid.Map(rapid.Int64Range(0, 4e12), func(ms int64) any { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }),
			rapid.Map(rapid.Int64Range(-1e18, 1e18), func(ns int64) any { return time.Unix(0, ns).In(time.FixedZone("x", 3600)) })),
		"retryAfterMs": rapid.OneOf(
			rapid.Map(rapid.IntRange(-10, 1e7), func(n int) any { return n }),
			rapid.Map(rapid.Int64(), func(n int64) any { return n }),
			rapid.Map(rapid.Float64Range(-1, 1e19), func(f float64) any { return f }),
			rapid.Just[any](json.Number("250"))),
		"issues": rapid.OneOf(
			rapid.Map(rapid.SliceOf(issue), func(s []surface.Issue) any { return s }),
			rapid.Map(rapid.SliceOf(issue), func(s []surface.Issue) any { // as a handler may build them
				out := make([]map[string]any, len(s))
				for i, x := range s {
					out[i] = map[string]any{"path": x.Path, "message": x.Message}
				}
				return out
			})),
		"lockedFields": rapid.OneOf(
			rapid.Map(rapid.SliceOf(text), func(s []string) any { return s }),
			rapid.Map(rapid.SliceOf(text), func(s []string) any {
				out := make([]any, len(s))
				for i, x := range s {
					out[i] = x
				}
				return out
			})),
		"instances": rapid.Map(rapid.SliceOf(ref), func(s []surface.InstanceRef) any { return s }),
	}
	keys := []string{"reason", "confirmationId", "summary", "liveRegistrationId", "approveUrl", "effect", "origin",
		"expiresAt", "retryAfterMs", "issues", "lockedFields", "instances"}
	codes := []surface.Code{surface.CodeConfirmationRequired, surface.CodeInvalidInput, surface.CodeAmbiguousInstance,
		surface.CodeStaleCapability, surface.CodeRateLimited, surface.CodeExecutionFailed, surface.CodeNotAuthorized}
	rapid.Check(t, func(rt *rapid.T) {
		var details map[string]any
		if rapid.Bool().Draw(rt, "hasDetails") {
			details = map[string]any{}
			for _, k := range keys {
				switch rapid.IntRange(0, 3).Draw(rt, "form of "+k) {
				case 0: // absent
				case 1:
					details[k] = junk.Draw(rt, "junk "+k)
				default:
					details[k] = forms[k].Draw(rt, k)
				}
			}
		}
		e := surface.NewError(rapid.SampledFrom(codes).Draw(rt, "code"), "", details)
		in := access(e)
		wire := access(overWire(rt, e))
		if !in.ExpiresAt.Equal(wire.ExpiresAt) {
			rt.Fatalf("ExpiresAt: in process %v, over the wire %v", in.ExpiresAt, wire.ExpiresAt)
		}
		in.ExpiresAt, wire.ExpiresAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(in, wire) {
			b, _ := json.Marshal(e)
			rt.Fatalf("accessors differ for %s\nin process:    %+v\nover the wire: %+v", b, in, wire)
		}
		// The caller owns what it gets: changing it changes no error.
		if len(in.Issues) > 0 {
			in.Issues[0].Path = "changed"
			if e.Issues()[0].Path == "changed" {
				rt.Fatal("Issues returned the error's own slice")
			}
		}
		if len(in.Instances) > 0 && in.Instances[0].Context != nil {
			in.Instances[0].Context.Type = "changed"
			if e.Instances()[0].Context.Type == "changed" {
				rt.Fatal("Instances returned the error's own parent")
			}
		}
	})
}

// The accessors read what the registry puts in each detail of the error
// matrix (semantics §4.1), in process and over the wire alike.
// AS-ERR-001.
func TestErrorAccessorsReadTheRegistrysDetails_AS_ERR_001(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	reg := surfacetest.NewRegistry(t, &surface.Options{Now: func() time.Time { return now }})
	type in struct {
		N int `json:"n"`
	}
	act := func(confirm surface.Confirmation, policies ...surface.Policy) surface.Capability {
		return surface.Action(surface.ActionDef[in, surface.None]{Description: "Acts", Effect: surface.EffectLocalState,
			Confirmation: confirm, Policies: policies,
			Execute: func(context.Context, *surface.Call, in) (surface.None, error) { return surface.None{}, nil }})
	}
	for _, id := range []string{"a", "b"} {
		surfacetest.MustRegister(t, reg, surface.Component{Type: "pane", InstanceID: id, Description: "Pane " + id,
			Actions: map[string]surface.Capability{"poke": act(surface.ConfirmNever)}})
	}
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "vault", Description: "Vault",
		Actions: map[string]surface.Capability{
			"open":  act(surface.ConfirmRequired),
			"limit": act(surface.ConfirmNever, surface.RateLimit(1, time.Minute)),
		}})
	call := func(inv surface.Invocation) surface.Result { return reg.Invoke(bg, inv, as("a")) }
	both := func(t *testing.T, e *surface.Error, check func(e *surface.Error)) {
		t.Helper()
		check(e)
		check(overWire(t, e))
	}

	t.Run("CONFIRMATION_REQUIRED", func(t *testing.T) {
		e := surfacetest.RequireCode(t, call(surface.Invocation{CapabilityID: "view:vault.open", Input: json.RawMessage(`{"n":1}`)}),
			surface.CodeConfirmationRequired)
		pending := reg.Confirmations().Pending()
		if len(pending) != 1 {
			t.Fatalf("pending %+v", pending)
		}
		p := pending[0]
		both(t, e, func(e *surface.Error) {
			if e.ConfirmationID() != p.ConfirmationID || !strings.HasPrefix(e.ConfirmationID(), "cnf_") || e.Summary() != p.Summary ||
				e.Summary() == "" || e.Effect() != surface.EffectLocalState || e.Origin() != surface.OriginClient ||
				!e.ExpiresAt().Equal(p.ExpiresAt.Truncate(time.Millisecond)) || e.ExpiresAt().Location() != time.UTC {
				t.Fatalf("%+v: %+v, pending %+v", e, access(e), p)
			}
			if e.ApproveURL() != "" {
				t.Fatalf("the registry set an approve link: %+v", access(e))
			}
		})
		// An adapter adds the host's approve link: details.approveUrl and
		// the message, on a copy; the other details are unchanged.
		const link = "https://app.example/approve/x?sig=abc"
		linked := e.WithApproveURL(link)
		both(t, linked, func(l *surface.Error) {
			got, want := access(l), access(e)
			want.ApproveURL = link
			if !reflect.DeepEqual(got, want) || !strings.Contains(l.Message, " "+link+" ") ||
				l.Code != surface.CodeConfirmationRequired || l.Retry != surface.RetryWithConfirmation {
				t.Fatalf("%+v: %+v", l, got)
			}
		})
		if e.ApproveURL() != "" || strings.Contains(e.Message, link) {
			t.Fatal("WithApproveURL changed the original")
		}
	})
	t.Run("INVALID_INPUT", func(t *testing.T) {
		e := surfacetest.RequireCode(t, call(surface.Invocation{CapabilityID: "view:vault.open", RegistrationID: h.ID(),
			Input: json.RawMessage(`{"n":"x"}`)}), surface.CodeInvalidInput)
		both(t, e, func(e *surface.Error) {
			if is := e.Issues(); len(is) != 1 || is[0].Path != "n" || is[0].Message == "" || e.LockedFields() != nil {
				t.Fatalf("%+v: %+v", e, access(e))
			}
		})
	})
	t.Run("AMBIGUOUS_INSTANCE", func(t *testing.T) {
		e := surfacetest.RequireCode(t, call(surface.Invocation{CapabilityID: "view:pane.poke", Input: json.RawMessage(`{"n":1}`)}),
			surface.CodeAmbiguousInstance)
		both(t, e, func(e *surface.Error) {
			got := e.Instances()
			if len(got) != 2 || got[0].InstanceID != "a" || got[1].InstanceID != "b" || got[0].Description != "Pane a" ||
				!strings.HasPrefix(got[0].RegistrationID, "reg_") || got[0].Context != nil {
				t.Fatalf("%+v", got)
			}
		})
	})
	t.Run("RATE_LIMITED", func(t *testing.T) {
		ok := call(surface.Invocation{CapabilityID: "view:vault.limit", Input: json.RawMessage(`{"n":1}`)})
		surfacetest.RequireOK(t, ok)
		e := surfacetest.RequireCode(t, call(surface.Invocation{CapabilityID: "view:vault.limit", Input: json.RawMessage(`{"n":1}`)}),
			surface.CodeRateLimited)
		both(t, e, func(e *surface.Error) {
			if e.RetryAfter() != time.Minute || e.Reason() != surface.ReasonRate {
				t.Fatalf("%+v: %+v", e, access(e))
			}
		})
	})
	t.Run("STALE_CAPABILITY", func(t *testing.T) {
		old := h.ID()
		h.Unregister()
		h = surfacetest.MustRegister(t, reg, surface.Component{Type: "vault", Description: "Vault",
			Actions: map[string]surface.Capability{"limit": act(surface.ConfirmNever)}})
		e := surfacetest.RequireCode(t, call(surface.Invocation{CapabilityID: "view:vault.limit", RegistrationID: old,
			Input: json.RawMessage(`{"n":1}`)}), surface.CodeStaleCapability)
		both(t, e, func(e *surface.Error) {
			if e.LiveRegistrationID() != h.ID() || e.Reason() != surface.ReasonRegistrationReplaced {
				t.Fatalf("%+v: %+v", e, access(e))
			}
		})
	})
	t.Run("NOT_AUTHORIZED", func(t *testing.T) {
		e := surface.NewError(surface.CodeNotAuthorized, "", map[string]any{"origin": "server"})
		both(t, e, func(e *surface.Error) {
			if e.Origin() != surface.OriginServer {
				t.Fatalf("%+v", access(e))
			}
		})
	})
	t.Run("no details", func(t *testing.T) {
		var nilErr *surface.Error
		for _, e := range []*surface.Error{nilErr, surface.NewError(surface.CodeTimeout, "", nil)} {
			if got := access(e); !reflect.DeepEqual(got, accessed{ExpiresAt: time.Time{}.UTC()}) {
				t.Fatalf("%+v", got)
			}
		}
	})
	t.Run("clamped retry", func(t *testing.T) {
		for _, c := range []struct {
			v    any
			want time.Duration
		}{{-5, 0}, {math.Inf(1), math.MaxInt64}, {1e30, math.MaxInt64}, {1.5, 1500 * time.Microsecond}, {"250", 0}} {
			e := &surface.Error{Code: surface.CodeRateLimited, Details: map[string]any{"retryAfterMs": c.v}}
			if got := e.RetryAfter(); got != c.want {
				t.Errorf("retryAfterMs %v: RetryAfter %v, want %v", c.v, got, c.want)
			}
		}
	})
}

// WithApproveURL applies to CONFIRMATION_REQUIRED only and never cuts the
// link: a message too long for the cap points at details.approveUrl.
func TestErrorWithApproveURL(t *testing.T) {
	e := surface.NewError(surface.CodeConfirmationRequired, "", map[string]any{"confirmationId": "cnf_x"})
	if e.WithApproveURL("") != e {
		t.Fatal("an empty link made a copy")
	}
	other := surface.NewReasonError(surface.CodeConfirmationInvalid, surface.ReasonDenied, "")
	if other.WithApproveURL("https://app.example/a") != other {
		t.Fatal("a link added to another code")
	}
	var nilErr *surface.Error
	if nilErr.WithApproveURL("https://app.example/a") != nil {
		t.Fatal("nil")
	}
	long := "https://app.example/approve/" + strings.Repeat("s", 300)
	l := e.WithApproveURL(long)
	if l.ApproveURL() != long || strings.Contains(l.Message, "https://") || !strings.Contains(l.Message, "details.approveUrl") ||
		len([]rune(l.Message)) > 300 || l.ConfirmationID() != "cnf_x" {
		t.Fatalf("%+v", l)
	}
	bare := (&surface.Error{Code: surface.CodeConfirmationRequired}).WithApproveURL("https://app.example/a")
	if bare.ApproveURL() != "https://app.example/a" {
		t.Fatalf("%+v", bare)
	}
}
