package mcpsurface_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// answering returns client options whose elicitation handler answers with
// action and, for "accept", {"approve": approve}; asked counts the
// questions and before runs first.
func answering(action string, approve bool, asked *atomic.Int64, before func(*mcp.ElicitRequest)) *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if before != nil {
			before(req)
		}
		res := &mcp.ElicitResult{Action: action}
		if action == "accept" {
			res.Content = map[string]any{"approve": approve}
		}
		return res, nil
	}}
}

// Elicitation round trip: the client is asked, approves, and the call
// executes once with the registry's record approved and consumed; at both
// protocol generations (2026-07-28 natively, older through
// elicitation/create).
func TestElicitationApprove(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, _ := newApp(t)
			rec := surfacetest.Record(t, reg)
			srv := newServer(t, reg, &mcpsurface.Options{Elicit: true})
			var asked atomic.Int64
			var message string
			cs := connect(t, srv, version, answering("accept", true, &asked, func(req *mcp.ElicitRequest) {
				message = req.Params.Message
				if len(reg.Confirmations().Pending()) != 1 {
					t.Error("no pending record while the user is asked")
				}
			}))
			env := callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, nil)
			requireOK(t, env)
			if a.wipes.Load() != 1 || asked.Load() != 1 {
				t.Fatalf("wipes %d, asked %d", a.wipes.Load(), asked.Load())
			}
			if !strings.Contains(message, `Wipe devices — input: {"ids":["d1"]}`) {
				t.Fatalf("message %q", message)
			}
			if len(reg.Confirmations().Pending()) != 0 {
				t.Fatal("record still pending")
			}
			var resolved *surface.ConfirmationResolved
			for _, e := range rec.Events() {
				if r, ok := e.(surface.ConfirmationResolved); ok {
					resolved = &r
				}
			}
			if resolved == nil || resolved.Outcome != surface.OutcomeApproved {
				t.Fatalf("the registry's record was not approved: %v", rec.Types())
			}
			// Calls that need no confirmation are not affected.
			requireOK(t, callTool(t, cs, "view_devices__table__selectRows", map[string]any{"ids": []string{"d1"}}, nil))
			if asked.Load() != 1 {
				t.Fatal("asked for a call that needs no confirmation")
			}
		})
	}
}

// Declining, cancelling or accepting with approve=false denies: the
// registry's CONFIRMATION_INVALID denied comes back, nothing runs.
func TestElicitationDecline(t *testing.T) {
	for _, version := range versions {
		for _, c := range []struct {
			action  string
			approve bool
		}{{"decline", false}, {"cancel", false}, {"accept", false}} {
			t.Run(version+"/"+c.action, func(t *testing.T) {
				reg, a, _ := newApp(t)
				srv := newServer(t, reg, &mcpsurface.Options{Elicit: true})
				var asked atomic.Int64
				cs := connect(t, srv, version, answering(c.action, c.approve, &asked, nil))
				env := callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, nil)
				if e := requireCode(t, env, surface.CodeConfirmationInvalid); e.Details["reason"] != "denied" {
					t.Fatalf("%+v", e)
				}
				if a.wipes.Load() != 0 || asked.Load() != 1 {
					t.Fatalf("wipes %d, asked %d", a.wipes.Load(), asked.Load())
				}
			})
		}
	}
}

// A decline never executes, even if the record was approved in the app
// while the client was asking.
func TestElicitationDeclineAfterAppApproval(t *testing.T) {
	reg, a, _ := newApp(t)
	srv := newServer(t, reg, &mcpsurface.Options{Elicit: true})
	var asked atomic.Int64
	cs := connect(t, srv, v2026, answering("decline", false, &asked, func(*mcp.ElicitRequest) {
		reg.Confirmations().Resolve(reg.Confirmations().Pending()[0].ConfirmationID, surface.Resolution{Approved: true})
	}))
	env := callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, nil)
	if e := requireCode(t, env, surface.CodeConfirmationInvalid); e.Details["reason"] != "denied" {
		t.Fatalf("%+v", e)
	}
	if a.wipes.Load() != 0 {
		t.Fatal("a decline executed")
	}
}

// Without the client capability, or without Options.Elicit, it is
// two-phase.
func TestElicitationFallsBackToTwoPhase(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, _, _ := newApp(t)
			srv := newServer(t, reg, &mcpsurface.Options{Elicit: true})
			cs := connect(t, srv, version, nil) // no ElicitationHandler: no capability
			requireCode(t, callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, nil), surface.CodeConfirmationRequired)

			plain := newServer(t, reg, nil)
			var asked atomic.Int64
			cs2 := connect(t, plain, version, answering("accept", true, &asked, nil))
			requireCode(t, callTool(t, cs2, "view_devices__table__wipe", map[string]any{"ids": []string{"d2"}}, nil), surface.CodeConfirmationRequired)
			if asked.Load() != 0 {
				t.Fatal("asked without Options.Elicit")
			}
		})
	}
}

// A remount while the user decides makes the approval stale: the retry
// targets the registration the confirmation was issued for.
func TestElicitationStaleAfterRemount_AS_STALE_001(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, h := newApp(t)
			srv := newServer(t, reg, &mcpsurface.Options{Elicit: true})
			var asked atomic.Int64
			cs := connect(t, srv, version, answering("accept", true, &asked, func(*mcp.ElicitRequest) {
				h.Unregister()
				surfacetest.MustRegister(t, reg, a.table("main"))
			}))
			env := callTool(t, cs, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}}, nil)
			if e := requireCode(t, env, surface.CodeStaleCapability); e.Details["reason"] != "registration-replaced" {
				t.Fatalf("%+v", e)
			}
			if a.wipes.Load() != 0 {
				t.Fatal("ran on a replaced registration")
			}
		})
	}
}

// The request state is signed and bound to the tool, the arguments, the
// registry and the consumer: a forged or replayed state is refused with a
// JSON-RPC error before anything runs (SEP-2322).
func TestElicitationRequestState(t *testing.T) {
	reg, a, _ := newApp(t)
	srv := newServer(t, reg, &mcpsurface.Options{Elicit: true})
	opts := &mcp.ClientOptions{
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true}, // drive the rounds by hand
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil },
	}
	cs := connect(t, srv, v2026, opts)
	args := map[string]any{"ids": []string{"d1"}}
	first, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__wipe", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if !first.NeedsInput() || first.RequestState == "" {
		t.Fatalf("want an input request, got %+v", first)
	}
	ep, ok := first.InputRequests["confirm"].(*mcp.ElicitParams)
	if !ok || ep.Mode != "form" {
		t.Fatalf("input requests %+v", first.InputRequests)
	}
	approve := mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	retry := func(name string, args any, state string) envelope {
		t.Helper()
		return callToolParams(t, cs, &mcp.CallToolParams{Name: name, Arguments: args, InputResponses: approve, RequestState: state})
	}
	// refused checks that a retry is refused as SEP-2322 asks of state
	// that fails verification: a JSON-RPC error, invalid params.
	refused := func(what string, cs *mcp.ClientSession, name string, args any, state string) {
		t.Helper()
		_, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args, InputResponses: approve, RequestState: state})
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("%s: %v, want a JSON-RPC invalid-params error", what, err)
		}
	}
	state := first.RequestState
	tampered := state[:len(state)-2] + flip(state[len(state)-2:])
	for _, c := range []struct {
		name  string
		tool  string
		args  any
		state string
	}{
		{"forged signature", "view_devices__table__wipe", args, tampered},
		{"no signature", "view_devices__table__wipe", args, strings.Split(state, ".")[0]},
		{"other arguments", "view_devices__table__wipe", map[string]any{"ids": []string{"d1", "d2"}}, state},
		{"other tool", "view_devices__table__selectRows", args, state},
	} {
		refused(c.name, cs, c.tool, c.args, c.state)
	}
	// Another registry's server, even with the same key, refuses it.
	other, _, _ := newApp(t)
	key := []byte("shared-key")
	s1 := newServer(t, reg, &mcpsurface.Options{Elicit: true, SigningKey: key})
	s2 := newServer(t, other, &mcpsurface.Options{Elicit: true, SigningKey: key})
	c1, c2 := connect(t, s1, v2026, opts), connect(t, s2, v2026, opts)
	r1, err := c1.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__wipe", Arguments: map[string]any{"ids": []string{"d7"}}})
	if err != nil || r1.RequestState == "" {
		t.Fatalf("%v %+v", err, r1)
	}
	refused("another registry's state", c2, "view_devices__table__wipe", map[string]any{"ids": []string{"d7"}}, r1.RequestState)
	if a.wipes.Load() != 0 {
		t.Fatal("ran with a bad state")
	}
	// The genuine answer works, once.
	requireOK(t, retry("view_devices__table__wipe", args, state))
	if a.wipes.Load() != 1 {
		t.Fatal("not executed")
	}
}

func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

func callToolParams(t testing.TB, cs *mcp.ClientSession, p *mcp.CallToolParams) envelope {
	t.Helper()
	res, err := cs.CallTool(bg, p)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", p.Name, err)
	}
	return decode(t, res)
}

// Meta mode elicits for surface_act as well.
func TestElicitationMetaMode_AS_ADAPTER_004(t *testing.T) {
	for _, version := range versions {
		t.Run(version, func(t *testing.T) {
			reg, a, _ := newApp(t)
			srv := newServer(t, reg, &mcpsurface.Options{Elicit: true, Mode: surface.ToolsetMeta})
			var asked atomic.Int64
			cs := connect(t, srv, version, answering("accept", true, &asked, nil))
			env := callTool(t, cs, "surface_act", map[string]any{"capabilityId": "view:devices.table.wipe", "input": map[string]any{"ids": []string{"d1"}}}, nil)
			requireOK(t, env)
			if a.wipes.Load() != 1 || asked.Load() != 1 {
				t.Fatalf("wipes %d, asked %d", a.wipes.Load(), asked.Load())
			}
		})
	}
}
