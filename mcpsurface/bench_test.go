package mcpsurface_test

import (
	"bytes"
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
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
					measure(b, httpSessions(b, agentsurfaceHandler(b, n), n, version), noopParams)
				})
				b.Run("server=bare", func(b *testing.B) {
					measure(b, httpSessions(b, bareHandler(n, version), n, version), noopParams)
				})
			})
		}
	}
}

// The HTTP cases of BenchmarkRoundTrip with both servers up at once, in
// alternating blocks of calls (ten per session, at least 200; who goes
// first alternates too), so that both meet the same machine: on a shared
// machine the load of the moment moves either figure more than the
// servers differ. It reports the throughput of each (calls/s-agentsurface,
// calls/s-bare) and their ratio, agentsurface over bare (≥ 1 is as fast
// as the bare SDK or faster), and the same for CPU per call (cpu-ratio:
// ≤ 1 is as cheap or cheaper). With both sides bare it measures 1.00 ±
// 0.03. Both sides share one heap, so the collector's cost of a larger
// live heap on one side is paid by both: BenchmarkRoundTrip (one side at
// a time) and BenchmarkServerToolsCall show it. Run it with
//
//	go test ./mcpsurface -run '^$' -bench RoundTripPaired -benchtime 6000x -count 8 > paired.txt
//	benchstat -filter '.unit:(ratio OR cpu-ratio)' paired.txt
//
// The bare side is one of two servers (sub-benchmark bare=…): raw is
// bareServer (the raw Server.AddTool, no validation of its input); typed
// is bareTypedServer, the same tool written the way the SDK's
// documentation writes tools (mcp.AddTool with Go types, so the SDK
// validates the input and the output against their schemas, as this
// package does through the registry).
func BenchmarkRoundTripPaired(b *testing.B) {
	bares := []struct {
		name   string
		server func() *mcp.Server
	}{{"raw", bareServer}, {"typed", bareTypedServer}}
	for _, bare := range bares {
		for _, version := range versions {
			for _, n := range benchSessions {
				b.Run(fmt.Sprintf("bare=%s/version=%s/sessions=%d", bare.name, version, n), func(b *testing.B) {
					pairedRun(b, httpSessions(b, agentsurfaceHandler(b, n), n, version),
						httpSessions(b, bareHandlerOf(n, version, bare.server), n, version), n)
				})
			}
		}
	}
}

// pairedRun is one case of BenchmarkRoundTripPaired: the sessions of our
// server and of the bare one, n each.
func pairedRun(b *testing.B, oursSessions, bareSessions []*mcp.ClientSession, n int) {
	sides := [2][]*mcp.ClientSession{oursSessions, bareSessions}
	block := max(200, 10*n)
	var runs [2]callRun
	b.ResetTimer()
	for round, done := 0, 0; done < b.N; round, done = round+1, done+block {
		k := min(block, b.N-done)
		for i := range 2 {
			side := (i + round) % 2
			runs[side].add(calls(b, sides[side], noopParams, k))
		}
	}
	b.StopTimer()
	ours, bare := runs[0], runs[1]
	b.ReportMetric(ours.perSecond(), "calls/s-agentsurface")
	b.ReportMetric(bare.perSecond(), "calls/s-bare")
	b.ReportMetric(ours.perSecond()/bare.perSecond(), "ratio")
	b.ReportMetric(ours.cpuPerCall()/bare.cpuPerCall(), "cpu-ratio")
}

// agentsurfaceHandler is an HTTPHandler serving n users, "tok-i" the
// token of the i-th, each with a registry of its own (noopRegistry).
func agentsurfaceHandler(b *testing.B, n int) http.Handler {
	users := map[string]*surface.Registry{}
	for i := range n {
		users[fmt.Sprint("tok-", i)] = noopRegistry(b)
	}
	h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
		return users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")], surface.Consumer{ID: "bench"}, nil
	}, nil)
	b.Cleanup(func() { _ = h.Close() }) // after the clients and the HTTP server
	return h
}

// bareHandler is the SDK's StreamableHTTPHandler serving n users, "tok-i"
// the token of the i-th, each with a bareServer of its own, stateful at
// 2025-11-25 and session-less at 2026-07-28 (the SDK serves 2026-07-28
// only session-less).
func bareHandler(n int, version string) http.Handler {
	return bareHandlerOf(n, version, bareServer)
}

// bareHandlerOf is bareHandler with the servers newServer makes.
func bareHandlerOf(n int, version string, newServer func() *mcp.Server) http.Handler {
	users := map[string]*mcp.Server{}
	for i := range n {
		users[fmt.Sprint("tok-", i)] = newServer()
	}
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	}, &mcp.StreamableHTTPOptions{Stateless: version == v2026})
}

// The server's side of a tools/call alone, side by side with a bare
// go-sdk server (bareServer): a raw JSON-RPC peer over in-memory
// transports, in a stateful 2025-11-25 session, sends one call at a time
// and reads the answer, so that the time per call is the server's (the
// SDK's decoding, dispatch and encoding, and on the agentsurface side this
// package and the registry) and little else. The difference between the
// two is what a call costs beyond the SDK:
//
//	go test ./mcpsurface -run '^$' -bench ServerToolsCall -count 8 > server.txt
//	benchstat -col /server server.txt
func BenchmarkServerToolsCall(b *testing.B) {
	b.Run("server=agentsurface", func(b *testing.B) {
		srv, err := mcpsurface.NewServer(noopRegistry(b), surface.Consumer{ID: "bench"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Close() })
		rawCalls(b, srv.MCP())
	})
	// The registry with a one-record audit sink and a one-entry dedupe
	// cache: the difference to server=agentsurface is what the default
	// stores (1,000 audit records, 200 dedupe entries) cost the collector.
	b.Run("server=agentsurface-smallstores", func(b *testing.B) {
		reg := surfacetest.NewRegistry(b, &surface.Options{Audit: surface.NewMemorySink(1), Limits: surface.Limits{DedupeCacheSize: 1}})
		surfacetest.MustRegister(b, reg, surface.Component{Type: "bench", Description: "Bench",
			Actions: map[string]surface.Capability{"noop": surfacetest.Noop("Does nothing", surface.EffectLocalState)}})
		srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "bench"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Close() })
		rawCalls(b, srv.MCP())
	})
	b.Run("server=bare", func(b *testing.B) { rawCalls(b, bareServer()) })
}

// rawCalls initializes a session with s as a raw JSON-RPC peer and makes
// b.N calls of noopParams, one at a time.
func rawCalls(b *testing.B, s *mcp.Server) {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(bg, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := ct.Connect(bg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = conn.Close()
		_ = ss.Wait()
	})
	roundTrip := func(id int64, method string, params string) *jsonrpc.Response {
		rid, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(bg, &jsonrpc.Request{ID: rid, Method: method, Params: json.RawMessage(params)}); err != nil {
			b.Fatal(err)
		}
		msg, err := conn.Read(bg)
		if err != nil {
			b.Fatal(err)
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok || resp.Error != nil {
			b.Fatalf("%s: %+v", method, msg)
		}
		return resp
	}
	roundTrip(1, "initialize", `{"protocolVersion":"`+v2025+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	if err := conn.Write(bg, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		b.Fatal(err)
	}
	params := `{"name":"` + noopParams.Name + `","arguments":{}}`
	b.ReportAllocs()
	cpu0, n := cpuTime(), 0
	for i := int64(2); b.Loop(); i++ {
		if resp := roundTrip(i, "tools/call", params); bytes.Contains(resp.Result, []byte(`"isError":true`)) {
			b.Fatalf("%s", resp.Result)
		}
		n++
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/op")
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

// noopOut is the result envelope of noopEnvelope as a Go type.
type noopOut struct {
	Status         string `json:"status"`
	InvocationID   string `json:"invocationId"`
	CapabilityID   string `json:"capabilityId"`
	SurfaceVersion string `json:"surfaceVersion"`
}

// bareTypedServer is bareServer's tool written with mcp.AddTool and Go
// types, as the SDK's documentation writes tools: the SDK infers the
// input and output schemas, validates every call's input and output
// against them, and answers the output as text and as structured
// content, the same bytes as bareServer's.
func bareTypedServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: noopParams.Name},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, noopOut, error) {
			return nil, noopOut{Status: "ok", InvocationID: "mcp_0123456789_1", CapabilityID: "view:bench.noop", SurfaceVersion: "1"}, nil
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
	b.ReportAllocs()
	b.ResetTimer()
	r := calls(b, sessions, params, b.N)
	b.StopTimer()
	if len(r.latencies) == 0 {
		return
	}
	all := r.latencies
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(r.perSecond(), "calls/s")
	b.ReportMetric(r.cpuPerCall(), "cpu-µs/call")
}

// callRun is what a run of calls measured.
type callRun struct {
	latencies    []time.Duration
	elapsed, cpu time.Duration
}

func (r callRun) perSecond() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }
func (r callRun) cpuPerCall() float64 {
	return float64(r.cpu.Microseconds()) / float64(len(r.latencies))
}

// add adds the figures of o to r.
func (r *callRun) add(o callRun) {
	r.latencies = append(r.latencies, o.latencies...)
	r.elapsed += o.elapsed
	r.cpu += o.cpu
}

// calls makes n calls of params spread over the sessions, all calling at
// once, and returns their latencies, the wall time and the CPU time of
// this whole process (client and server) they took.
func calls(b *testing.B, sessions []*mcp.ClientSession, params *mcp.CallToolParams, n int) callRun {
	lat := make([][]time.Duration, len(sessions))
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	for i, cs := range sessions {
		k := n / len(sessions)
		if i < n%len(sessions) {
			k++
		}
		lat[i] = make([]time.Duration, 0, k)
		wg.Go(func() {
			for range k {
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
	return callRun{latencies: slices.Concat(lat...), elapsed: time.Since(start), cpu: cpuTime() - cpu0}
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

// Creating the Server of a user's (registry, consumer), as an
// HTTPHandler does on the user's first request (here a ping), with n
// other users' Servers already cached (existing=0, 1000, 4000): the cost
// of the n+1-th must not grow with n. Each user has a registry of their
// own (the devices table), made before the timer starts. cpu-ns/op is the CPU
// time of the whole process per creation, the collector's included.
//
//	go test ./mcpsurface -run '^$' -bench ServerCreation -benchtime 400x -count 6 > create.txt
//	benchstat -col /existing create.txt
func BenchmarkServerCreation(b *testing.B) {
	for _, n := range []int{0, 1000, 4000} {
		b.Run(fmt.Sprint("existing=", n), func(b *testing.B) {
			var mu sync.Mutex
			users := map[string]*surface.Registry{}
			h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
				mu.Lock()
				defer mu.Unlock()
				return users[r.Header.Get("Authorization")], surface.Consumer{ID: "agent"}, nil
			}, nil)
			b.Cleanup(func() { _ = h.Close() })
			next := 0
			create := func() {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
				r.Header.Set("Authorization", fmt.Sprint("tok-", next))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("ping: %d %s", w.Code, w.Body)
				}
				next++
			}
			newUser := func() {
				reg := surfacetest.NewRegistry(b, nil)
				surfacetest.MustRegister(b, reg, (&app{}).table("main"))
				mu.Lock()
				users[fmt.Sprint("tok-", next)] = reg
				mu.Unlock()
			}
			for range n {
				newUser()
				create()
			}
			if got := mcpsurface.CachedServers(h); got != n {
				b.Fatalf("%d servers cached, want %d", got, n)
			}
			for range b.N { // the registries of the users to come
				newUser()
				next++
			}
			next = n
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuTime()
			for range b.N {
				create()
			}
			b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
