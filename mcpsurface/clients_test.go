package mcpsurface_test

import (
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AS-CONFIRM-004 between a user's own MCP clients: a resolver that maps
// two clients of one user to one registry and one consumer (the pairing
// rule this package recommends) must not let the second client spend the
// approval the user gave to the first client's request (spec 06 rule 2:
// evidence stays bound to who asked for it). Two go-sdk clients over
// Streamable HTTP, each with its own credential (and, in a stateful
// session, also with one credential): client one gets
// CONFIRMATION_REQUIRED and the user approves; client two calls the same
// tool with the same arguments, with client one's confirmation id and
// without, and executes nothing (it gets a request of its own); client
// one's retry executes once.
func TestApprovalStaysWithAskingClient_AS_CONFIRM_004(t *testing.T) {
	type mode struct {
		name      string
		stateless bool
		version   string
		tokens    [2]string
	}
	var modes []mode
	for _, m := range httpModes {
		modes = append(modes, mode{m.name, m.stateless, m.version, [2]string{"tok-desktop", "tok-cli"}})
	}
	modes = append(modes, mode{"stateful/one-credential", false, v2025, [2]string{"tok-desktop", "tok-desktop"}})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			reg, a, _ := newApp(t)
			ann := surface.Consumer{ID: "ann", Kind: surface.ConsumerMCPBridge}
			f := newHTTP(t, &mcpsurface.HTTPOptions{Stateless: m.stateless}, map[string]*session{
				"tok-desktop": {reg: reg, app: a, consumer: ann},
				"tok-cli":     {reg: reg, app: a, consumer: ann},
			})
			one := f.mustClient(t, m.tokens[0], m.version, nil)
			two := f.mustClient(t, m.tokens[1], m.version, nil)
			const tool = "view_devices__table__wipe"
			args := map[string]any{"ids": []string{"d1"}}

			first := callTool(t, one, tool, args, nil)
			cid, _ := requireCode(t, first, surface.CodeConfirmationRequired).Details["confirmationId"].(string)
			if !reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true}) {
				t.Fatal("resolve")
			}
			if e := requireCode(t, callTool(t, two, tool, args, mcp.Meta{mcpsurface.MetaConfirmationID: cid}), surface.CodeConfirmationInvalid); e.Details["reason"] != "mismatch" {
				t.Fatalf("client two presenting client one's confirmation: %+v", e)
			}
			own, _ := requireCode(t, callTool(t, two, tool, args, nil), surface.CodeConfirmationRequired).Details["confirmationId"].(string)
			if own == cid {
				t.Fatal("client two was handed client one's approval")
			}
			if n := a.wipes.Load(); n != 0 {
				t.Fatalf("client two executed on client one's approval (%d)", n)
			}
			ok := callTool(t, one, tool, args, nil)
			requireOK(t, ok)
			if n := a.wipes.Load(); n != 1 || ok.InvocationID != first.InvocationID {
				t.Fatalf("client one's retry: %d executions, invocation ids %s, %s", n, first.InvocationID, ok.InvocationID)
			}
			requireOK(t, callTool(t, one, tool, args, mcp.Meta{mcpsurface.MetaConfirmationID: cid})) // a duplicate retry replays
			if n := a.wipes.Load(); n != 1 {
				t.Fatalf("executed %d times", n)
			}
		})
	}
}
