package mcpsurface_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchClient connects a client to s over in-memory transports at
// 2025-11-25.
func benchClient(b *testing.B, s *mcp.Server) *mcp.ClientSession {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(bg, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(bg, ct, &mcp.ClientSessionOptions{ProtocolVersion: v2025})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// A tools/call of a no-op action through the adapter and the registry.
func BenchmarkToolsCallRoundTrip(b *testing.B) {
	reg := surfacetest.NewRegistry(b, nil)
	surfacetest.MustRegister(b, reg, surface.Component{Type: "bench", Description: "Bench",
		Actions: map[string]surface.Capability{"noop": surfacetest.Noop("Does nothing", surface.EffectLocalState)}})
	srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "bench"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	cs := benchClient(b, srv.MCP())
	params := &mcp.CallToolParams{Name: "view_bench__noop", Arguments: map[string]any{}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(bg, params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// The same round trip against a bare go-sdk server with one no-op raw
// tool: the baseline.
func BenchmarkBareSDKRoundTrip(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "noop", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	cs := benchClient(b, s)
	params := &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(bg, params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// Toolset.Tools in direct mode, which every sync runs, for 40 and 300
// components with one observation and one action each.
func BenchmarkToolsetTools(b *testing.B) {
	for _, n := range []int{40, 300} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			reg := surfacetest.NewRegistry(b, nil)
			for i := range n {
				surfacetest.MustRegister(b, reg, surface.Component{
					Type: fmt.Sprintf("bench.c%03d", i), Description: "Component",
					Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads", i)},
					Actions:      map[string]surface.Capability{"act": surfacetest.Noop("Acts", surface.EffectLocalState)},
				})
			}
			ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyRemote})
			if err != nil {
				b.Fatal(err)
			}
			defer ts.Close()
			if got := len(ts.Tools()); got != 2*n {
				b.Fatalf("%d tools", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = ts.Tools()
			}
		})
	}
}
