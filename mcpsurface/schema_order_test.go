package mcpsurface_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over MCP a tool's input schema reaches the client as authored
// (semantics §10.8), in the bytes of the tools/list response: a raw
// schema's keys in the author's order, an inferred one's properties in
// struct field order. AS-ADAPTER-002.
func TestToolSchemasAsAuthored(t *testing.T) {
	type zetaFirst struct {
		Zeta  string `json:"zeta"`
		Alpha int    `json:"alpha"`
	}
	reg := surfacetest.NewRegistry(t, nil)
	const raw = `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer","minimum":1.0}},"required":["zeta"],"additionalProperties":false}`
	surfacetest.MustRegister(t, reg, surface.Component{Type: "zoo.form", Description: "A form", Actions: map[string]surface.Capability{
		"fill": surface.Action(surface.ActionDef[zetaFirst, surface.None]{Description: "Fills", Effect: surface.EffectLocalState, InputSchema: json.RawMessage(raw),
			Execute: func(context.Context, *surface.Call, zetaFirst) (surface.None, error) { return surface.None{}, nil }}),
		"note": surface.Action(surface.ActionDef[zetaFirst, surface.None]{Description: "Notes", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, zetaFirst) (surface.None, error) { return surface.None{}, nil }}),
	}})
	srv := newServer(t, reg, nil)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(bg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(bg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		_ = ss.Wait()
	})
	// A raw JSON-RPC client, so that the response is read as bytes.
	call := func(id int, method, params string) json.RawMessage {
		t.Helper()
		rid, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(bg, &jsonrpc.Request{ID: rid, Method: method, Params: json.RawMessage(params)}); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := conn.Read(bg)
			if err != nil {
				t.Fatal(err)
			}
			if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == rid {
				if resp.Error != nil {
					t.Fatalf("%s: %v", method, resp.Error)
				}
				return resp.Result
			}
		}
	}
	call(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	if err := conn.Write(bg, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(call(2, "tools/list", `{}`), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tool := range list.Tools {
		got[tool.Name] = string(tool.InputSchema)
	}
	if s := got["view_zoo__form__fill"]; s != raw {
		t.Errorf("raw schema over MCP:\n%s\nwant\n%s", s, raw)
	}
	if s := got["view_zoo__form__note"]; !strings.HasPrefix(s, `{"type":"object","properties":{"zeta":`) || strings.Index(s, `"alpha"`) < strings.Index(s, `"zeta"`) {
		t.Errorf("inferred schema over MCP not in field order: %s", s)
	}
}
