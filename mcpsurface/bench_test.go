package mcpsurface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// benchHTTPClient connects a go-sdk client over Streamable HTTP with a
// bearer token at a protocol version: a stateful session at 2025-11-25,
// session-less requests at 2026-07-28.
func benchHTTPClient(b *testing.B, url, token, version string, tr http.RoundTripper) *mcp.ClientSession {
	ct := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token, tr}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(bg, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// benchSessions are the concurrent session counts of the round-trip
// benchmarks.
var benchSessions = []int{1, 10, 100}

// noopRegistry is a registry with one no-op view action, the tool
// view_bench__noop.
func noopRegistry(b *testing.B) *surface.Registry {
	reg := surfacetest.NewRegistry(b, nil)
	surfacetest.MustRegister(b, reg, surface.Component{Type: "bench", Description: "Bench",
		Actions: map[string]surface.Capability{"noop": surfacetest.Noop("Does nothing", surface.EffectLocalState)}})
	return reg
}

// The round trip of a tools/call, side by side with a bare go-sdk server:
// the same client, transport, sessions and bytes on the wire, so that
// what differs is what this package and the registry do per call.
//
// Both sides serve one user per session, n sessions calling at once
// (sub-benchmarks sessions=1, 10, 100), each with a bearer token of its
// own and one MCP server per user:
//
//   - server=agentsurface: an HTTPHandler whose resolver maps the token to
//     the user's registry (one component, a no-op view action); the call
//     runs the registry's whole governed pipeline.
//   - server=bare: the SDK's StreamableHTTPHandler whose getServer maps
//     the token to the user's *mcp.Server (the least a multi-user server
//     does), with the same tool (name, input schema) added with the raw
//     Server.AddTool, whose handler returns the bytes the adapter returns
//     for this call: the result envelope as text and as structured
//     content.
//
// Over HTTP (transport=http) both run on loopback (httptest) behind the
// same go-sdk client, at version=2025-11-25 (a stateful session: the
// SDK's default handler) and at version=2026-07-28 (session-less: the
// SDK serves it only with Stateless, as this package's handler does for
// such requests). Over in-memory transports (transport=memory) each
// session is connected to its user's server directly (Server.MCP for
// this package).
//
// Compare the two with
//
//	go test ./mcpsurface -run '^$' -bench 'RoundTrip/transport=http' -benchtime 2000x -count 8 > new.txt
//	benchstat -col /server new.txt
//
// calls/s is the throughput (all sessions together), cpu-µs/call the
// CPU time of the whole process (client and server) per call.
func BenchmarkRoundTrip(b *testing.B) {
	for _, n := range benchSessions {
		b.Run(fmt.Sprintf("transport=memory/sessions=%d", n), func(b *testing.B) {
			b.Run("server=agentsurface", func(b *testing.B) {
				sessions := make([]*mcp.ClientSession, n)
				for i := range sessions {
					srv, err := mcpsurface.NewServer(noopRegistry(b), surface.Consumer{ID: "bench"}, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = srv.Close() })
					sessions[i] = benchClient(b, srv.MCP())
				}
				measure(b, sessions, noopParams)
			})
			b.Run("server=bare", func(b *testing.B) {
				sessions := make([]*mcp.ClientSession, n)
				for i := range sessions {
					sessions[i] = benchClient(b, bareServer())
				}
				measure(b, sessions, noopParams)
			})
		})
		for _, version := range versions {
			b.Run(fmt.Sprintf("transport=http/version=%s/sessions=%d", version, n), func(b *testing.B) {
				b.Run("server=agentsurface", func(b *testing.B) {
					users := map[string]*surface.Registry{}
					for i := range n {
						users[fmt.Sprint("tok-", i)] = noopRegistry(b)
					}
					h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
						return users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")], surface.Consumer{ID: "bench"}, nil
					}, nil)
					b.Cleanup(func() { _ = h.Close() })
					measure(b, httpSessions(b, h, n, version), noopParams)
				})
				b.Run("server=bare", func(b *testing.B) {
					users := map[string]*mcp.Server{}
					for i := range n {
						users[fmt.Sprint("tok-", i)] = bareServer()
					}
					// The SDK serves 2026-07-28 only session-less.
					h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
						return users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
					}, &mcp.StreamableHTTPOptions{Stateless: version == v2026})
					measure(b, httpSessions(b, h, n, version), noopParams)
				})
			})
		}
	}
}

// noopParams call the no-op action of noopRegistry.
var noopParams = &mcp.CallToolParams{Name: "view_bench__noop", Arguments: map[string]any{}}

// noopEnvelope is what the adapter answers to noopParams, byte for byte
// but for the invocation id's digits.
const noopEnvelope = `{"status":"ok","invocationId":"mcp_0123456789_1","capabilityId":"view:bench.noop","surfaceVersion":"1"}`

// bareServer is a go-sdk server with the tool of noopRegistry, added raw,
// whose handler answers noopEnvelope as the adapter does: as text and as
// structured content.
func bareServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: noopParams.Name, InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: noopEnvelope}},
				StructuredContent: json.RawMessage(noopEnvelope),
			}, nil
		})
	return s
}

// httpSessions serves h on loopback and connects n go-sdk clients at
// version, the i-th with the bearer token "tok-i".
func httpSessions(b *testing.B, h http.Handler, n int, version string) []*mcp.ClientSession {
	hs := httptest.NewServer(h)
	b.Cleanup(hs.Close)
	sessions := make([]*mcp.ClientSession, n)
	for i := range sessions {
		sessions[i] = benchHTTPClient(b, hs.URL, fmt.Sprint("tok-", i), version, hs.Client().Transport)
	}
	return sessions
}

// measure runs b.N calls of params spread over the sessions, all
// calling at once, and reports latency percentiles, throughput and CPU
// time per call (client and server: this whole process).
func measure(b *testing.B, sessions []*mcp.ClientSession, params *mcp.CallToolParams) {
	lat := make([][]time.Duration, len(sessions))
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i, cs := range sessions {
		n := b.N / len(sessions)
		if i < b.N%len(sessions) {
			n++
		}
		lat[i] = make([]time.Duration, 0, n)
		wg.Go(func() {
			for range n {
				t0 := time.Now()
				// A fresh copy per call: the client writes the 2026-07-28
				// request _meta into the params it is given.
				p := *params
				res, err := cs.CallTool(bg, &p)
				if err != nil || res.IsError {
					b.Error(err, res)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/call")
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
