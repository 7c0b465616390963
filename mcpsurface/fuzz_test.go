package mcpsurface_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fuzzTarget is one server mode with a connected session and its tools.
type fuzzTarget struct {
	cs    *mcp.ClientSession
	tools []string
}

// FuzzToolCall sends arbitrary arguments, _meta and request state to
// every known tool through real in-memory go-sdk sessions, in direct and
// meta mode at both protocol generations, with elicitation on. A call
// never panics (the server logs every recovered panic, which fails the
// run) and always returns a well-formed result envelope, or an input
// request for a confirmation; its only protocol error is the refusal of a
// request state that does not verify.
// Seed corpus: testdata/fuzz/FuzzToolCall.
func FuzzToolCall(f *testing.F) {
	reg, a, _ := newApp(f)
	surfacetest.MustRegister(f, reg, a.domainPanel())
	surfacetest.MustRegister(f, reg, surface.Component{Type: "devices.free", Description: "Free-form input",
		Actions: map[string]surface.Capability{
			"echo": surface.Action(surface.ActionDef[any, any]{Description: "Returns its input", Effect: surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in any) (any, error) { return in, nil }}),
		}})
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	var targets []fuzzTarget
	for _, mode := range []surface.ToolsetMode{surface.ToolsetDirect, surface.ToolsetMeta} {
		srv := newServer(f, reg, &mcpsurface.Options{Mode: mode, Elicit: true, Logger: log})
		for _, version := range versions {
			cs := connect(f, srv, version, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "decline"}, nil
				}})
			var tools []string
			for name := range listTools(f, cs) {
				tools = append(tools, name)
			}
			slices.Sort(tools)
			targets = append(targets, fuzzTarget{cs, tools})
		}
	}

	f.Add(uint8(0), uint16(0), []byte(`{"ids":["d1"]}`), []byte(`{}`), "")
	f.Add(uint8(2), uint16(3), []byte(`{"capabilityId":"view:devices.table.wipe","input":{"ids":["d1"]}}`), []byte(`{"agentsurface/invocationId":"x"}`), "")
	f.Add(uint8(1), uint16(8), []byte(`{"ids":["d1"]}`), []byte(`{"agentsurface/confirmationId":"cnf_bogus"}`), "e30.AAAA")
	f.Fuzz(func(t *testing.T, target uint8, tool uint16, args, meta []byte, state string) {
		tg := targets[int(target)%len(targets)]
		name := tg.tools[int(tool)%len(tg.tools)]
		if !json.Valid(args) { // a JSON-RPC message carries JSON: send the bytes as a string
			args, _ = json.Marshal(string(args))
		}
		var m mcp.Meta
		if json.Unmarshal(meta, &m) != nil {
			m = mcp.Meta{mcpsurface.MetaInvocationID: string(meta), mcpsurface.MetaConfirmationID: string(meta)}
		}
		delete(m, "progressToken") // the SDK's, not the adapter's: it must be a string or number
		p := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args), Meta: m}
		if state != "" {
			p.RequestState = state
			p.InputResponses = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
		}
		res, err := tg.cs.CallTool(bg, p)
		var wire *jsonrpc.Error
		if err != nil && state != "" && errors.As(err, &wire) && wire.Code == jsonrpc.CodeInvalidParams {
			return // a request state that does not verify is refused (SEP-2322)
		}
		if err != nil {
			t.Fatalf("%s(%s) _meta %s: protocol error %v", name, args, meta, err)
		}
		if l := logs.String(); strings.Contains(l, "panicked") {
			t.Fatalf("%s(%s) _meta %s: the server recovered a panic:\n%s", name, args, meta, l)
		}
		if res.NeedsInput() {
			if res.RequestState == "" || res.InputRequests["confirm"] == nil {
				t.Fatalf("malformed input request %+v", res)
			}
			return
		}
		env := decode(t, res)
		if env.InvocationID == "" || env.CapabilityID == "" || env.SurfaceVersion == "" {
			t.Fatalf("envelope without ids: %+v", env)
		}
		switch env.Status {
		case "ok":
			if env.Error != nil {
				t.Fatalf("ok with an error: %+v", env.Error)
			}
		case "error":
			if e := env.Error; e == nil || e.Code == "" || e.Message == "" || e.Retry == "" {
				t.Fatalf("malformed error: %+v", env.Error)
			}
		default:
			t.Fatalf("status %q", env.Status)
		}
	})
}
