package mcpsurface_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call acts on the catalog its session was last shown by tools/list:
// a replaced component is STALE_CAPABILITY registration-replaced, an
// unmounted one COMPONENT_UNMOUNTED (though its tool left the list), a
// destructive procedure after a surface change STALE_CAPABILITY
// surface-version-mismatch; listing again makes calls work.
// AS-STALE-001, AS-STALE-002, AS-LIFE-005 over a real SDK session.
func TestStaleCatalogPerSession_AS_STALE_001_002(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			reg, a, h := newAppWith(t, &surface.Options{OnDuplicate: surface.DuplicateReplace})
			srv := newServer(t, reg, nil)
			cs := connect(t, srv, v, nil)
			listTools(t, cs)
			sel := map[string]any{"ids": []string{"d1"}}

			// Replaced after the client listed: the call names the old
			// registration.
			h2 := surfacetest.MustRegister(t, reg, a.table("main"))
			e := requireCode(t, callTool(t, cs, "view_devices__table__selectRows", sel, nil), surface.CodeStaleCapability)
			if e.Details["reason"] != "registration-replaced" || e.Details["liveRegistrationId"] != h2.ID() {
				t.Fatalf("%+v", e)
			}
			// Another session that never listed calls the current catalog.
			other := connect(t, srv, v, nil)
			requireOK(t, callTool(t, other, "view_devices__table__selectRows", sel, nil))
			// Listing again: the call runs.
			listTools(t, cs)
			requireOK(t, callTool(t, cs, "view_devices__table__selectRows", sel, nil))
			if h.Status() != surface.HandleUnregistered {
				t.Fatalf("the replaced handle is %s", h.Status())
			}

			// Unmounted: its tools left the list, yet the session that was
			// shown them learns why its call fails.
			h2.Unregister()
			e = requireCode(t, callTool(t, cs, "view_devices__table__selectRows", sel, nil), surface.CodeComponentUnmounted)
			if e.Details["phase"] != "resolve" {
				t.Fatalf("%+v", e)
			}
			if m := listTools(t, cs); m["view_devices__table__selectRows"] != nil {
				t.Fatal("unmounted tool still listed")
			}
			if _, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__selectRows", Arguments: sel}); err == nil {
				t.Fatal("a tool the session was not shown was called")
			}

			// A destructive procedure after any surface change.
			surfacetest.MustRegister(t, reg, a.domainPanel())
			listTools(t, cs)
			surfacetest.MustRegister(t, reg, a.table("side")) // unrelated to the procedure
			e = requireCode(t, callTool(t, cs, "domain_devices__disable", map[string]any{"ids": []string{"d1"}}, nil), surface.CodeStaleCapability)
			if e.Details["reason"] != "surface-version-mismatch" || len(reg.Confirmations().Pending()) != 0 || a.disables.Load() != 0 {
				t.Fatalf("%+v", e)
			}
			listTools(t, cs)
			requireCode(t, callTool(t, cs, "domain_devices__disable", map[string]any{"ids": []string{"d1"}}, nil), surface.CodeConfirmationRequired)
		})
	}
}

// A new surface version re-announces version-gated procedures, so a
// client hears tools/list_changed even when no definition changed.
func TestVersionGatedToolsAnnounceChanges(t *testing.T) {
	reg, a, _ := newApp(t)
	surfacetest.MustRegister(t, reg, a.domainPanel())
	srv := newServer(t, reg, nil)
	ch := newChanges()
	cs := connect(t, srv, v2025, &mcp.ClientOptions{ToolListChangedHandler: ch.handler})
	before := listTools(t, cs)
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "hidden.thing", Description: "Out of sight",
		Policies:     []surface.Policy{{Name: "hide", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Hide() }}},
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads", 1)}})
	defer h.Unregister()
	after := ch.waitFor(t, cs, func(map[string]*mcp.Tool) bool { return true })
	if names(after) != names(before) {
		t.Fatalf("the list changed: %s", names(after))
	}
	requireCode(t, callTool(t, cs, "domain_devices__disable", map[string]any{"ids": []string{"d1"}}, nil), surface.CodeConfirmationRequired)
}

type traceKey struct{}

// Options.TraceContext runs first, with the request's _meta, and the
// context it returns reaches the capability's handler.
func TestTraceContextReachesHandler(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var mu sync.Mutex
	var seenMeta []map[string]any
	var seenByHandler []any
	surfacetest.MustRegister(t, reg, surface.Component{Type: "probe", Description: "Probe",
		Actions: map[string]surface.Capability{"poke": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Pokes", Effect: surface.EffectLocalState,
			Execute: func(ctx context.Context, _ *surface.Call, _ surface.None) (surface.None, error) {
				mu.Lock()
				seenByHandler = append(seenByHandler, ctx.Value(traceKey{}))
				mu.Unlock()
				return surface.None{}, nil
			},
		})}})
	srv := newServer(t, reg, &mcpsurface.Options{TraceContext: func(ctx context.Context, meta map[string]any) context.Context {
		mu.Lock()
		seenMeta = append(seenMeta, meta)
		mu.Unlock()
		return context.WithValue(ctx, traceKey{}, meta["traceparent"])
	}})
	cs := connect(t, srv, v2026, nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	requireOK(t, callTool(t, cs, "view_probe__poke", map[string]any{}, mcp.Meta{"traceparent": tp, "tracestate": "k=v"}))
	requireOK(t, callTool(t, cs, "view_probe__poke", map[string]any{}, nil))
	mu.Lock()
	defer mu.Unlock()
	if len(seenMeta) != 2 || seenMeta[0]["traceparent"] != tp || seenMeta[0]["tracestate"] != "k=v" || seenMeta[1]["traceparent"] != nil {
		t.Fatalf("TraceContext saw %v", seenMeta)
	}
	if len(seenByHandler) != 2 || seenByHandler[0] != tp || seenByHandler[1] != nil {
		t.Fatalf("handler saw %v", seenByHandler)
	}
}

// A panicking TraceContext is contained: the call goes on.
func TestTraceContextPanicContained(t *testing.T) {
	reg, _, _ := newApp(t)
	srv := newServer(t, reg, &mcpsurface.Options{TraceContext: func(context.Context, map[string]any) context.Context { panic("tracer exploded") }})
	cs := connect(t, srv, v2025, nil)
	requireOK(t, callTool(t, cs, "view_devices__table__readState", map[string]any{}, nil))
}

// Over HTTP, in every mode, a call acts on what was listed: session-less
// requests (2026-07-28 clients, and every client of a stateless handler)
// resolve against the last tools/list answered to their client, so a
// component replaced since is STALE_CAPABILITY registration-replaced
// until the client lists again. AS-STALE-001.
func TestHTTPStaleCatalog_AS_STALE_001(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(mode.name, func(t *testing.T) {
			reg, a, _ := newAppWith(t, &surface.Options{OnDuplicate: surface.DuplicateReplace})
			users := map[string]*session{"tok-alice": {reg: reg, app: a, consumer: surface.Consumer{ID: "alice"}}}
			f := newHTTP(t, &mcpsurface.HTTPOptions{Stateless: mode.stateless}, users)
			cs := f.mustClient(t, "tok-alice", mode.version, nil)
			sel := map[string]any{"ids": []string{"d1"}}
			listTools(t, cs)
			requireOK(t, callTool(t, cs, "view_devices__table__selectRows", sel, nil))
			h2 := surfacetest.MustRegister(t, reg, a.table("main"))
			e := requireCode(t, callTool(t, cs, "view_devices__table__selectRows", sel, nil), surface.CodeStaleCapability)
			if e.Details["reason"] != "registration-replaced" || e.Details["liveRegistrationId"] != h2.ID() {
				t.Fatalf("%+v", e)
			}
			listTools(t, cs)
			requireOK(t, callTool(t, cs, "view_devices__table__selectRows", sel, nil))
		})
	}
}

// Session-less 2026-07-28 clients of one user (one registry and
// consumer, a credential each) are told apart: each call refers to the
// catalog its own client was last shown (DESIGN decision 16), so one
// client's listing neither makes another's stale catalog current nor
// another's current catalog stale. What is remembered is bounded: beyond
// MaxListedClients clients, the one used the longest ago is forgotten
// and resolves against the current catalog, as a client that never
// listed. AS-STALE-001.
func TestSessionlessCatalogPerClient_AS_STALE_001(t *testing.T) {
	reg, a, _ := newAppWith(t, &surface.Options{OnDuplicate: surface.DuplicateReplace})
	ann := surface.Consumer{ID: "ann", Kind: surface.ConsumerMCPBridge}
	h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer tok-") {
			return nil, surface.Consumer{}, errors.New("unknown token")
		}
		return reg, ann, nil
	}, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		_ = h.Close()
		srv.Close()
	})
	client := func(i int) rawClient { return rawClient{srv.Client(), srv.URL, fmt.Sprint("tok-", i)} }
	list := func(c rawClient) {
		t.Helper()
		status, _, msg, err := c.postVersion(bg, "", v2026, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":`+meta2026+`}}`)
		if resp, _ := msg.(*jsonrpc.Response); err != nil || status != http.StatusOK || resp == nil || resp.Error != nil {
			t.Fatalf("tools/list: %d %v %+v", status, err, msg)
		}
	}
	call := func(c rawClient) envelope {
		t.Helper()
		status, _, msg, err := c.postVersion(bg, "", v2026, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"view_devices__table__selectRows","arguments":{"ids":["d1"]},"_meta":`+meta2026+`}}`)
		resp, _ := msg.(*jsonrpc.Response)
		if err != nil || status != http.StatusOK || resp == nil || resp.Error != nil {
			t.Fatalf("tools/call: %d %v %+v", status, err, msg)
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			t.Fatal(err)
		}
		return decode(t, &res)
	}
	remount := func() { surfacetest.MustRegister(t, reg, a.table("main")) }

	// One client's listing does not make another's catalog current.
	list(client(0))
	remount()
	list(client(1))
	if e := requireCode(t, call(client(0)), surface.CodeStaleCapability); e.Details["reason"] != "registration-replaced" {
		t.Fatalf("%+v", e)
	}
	requireOK(t, call(client(1)))
	// Nor another's current catalog stale.
	remount()
	list(client(1))
	list(client(0))
	requireOK(t, call(client(1)))
	requireOK(t, call(client(0)))

	// Bounded: one client more than remembered, and the first is forgotten.
	for i := range mcpsurface.MaxListedClients + 1 {
		list(client(i))
	}
	if n := mcpsurface.ListedClients(h); n != mcpsurface.MaxListedClients {
		t.Fatalf("%d clients remembered, want %d", n, mcpsurface.MaxListedClients)
	}
	remount()
	requireOK(t, call(client(0))) // forgotten: the current catalog
	requireCode(t, call(client(mcpsurface.MaxListedClients)), surface.CodeStaleCapability)
}
