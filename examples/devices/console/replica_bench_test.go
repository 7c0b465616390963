package console_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/internal/lbtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpAt connects an MCP client (2025-11-25, stateful) of token to the
// MCP endpoint at url, for a benchmark.
func mcpAt(b *testing.B, tr http.RoundTripper, url, token string) *mcp.ClientSession {
	b.Helper()
	t := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearerRT{token, tr}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench-agent", Version: "1.0.0"}, nil).
		Connect(bg, t, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// percentiles reports the p50 and p99 of ds in µs as name-p50-µs and
// name-p99-µs.
func percentiles(b *testing.B, name string, ds []time.Duration) (p50, p99 float64) {
	slices.Sort(ds)
	at := func(q float64) float64 {
		return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Nanoseconds()) / 1e3
	}
	p50, p99 = at(0.50), at(0.99)
	b.ReportMetric(p50, name+"-p50-µs")
	b.ReportMetric(p99, name+"-p99-µs")
	return p50, p99
}

// BenchmarkReplicas measures the console on three replicas (one
// PostgreSQL directory, one SQLite domain file) with 100 sessions, each
// with its views mounted and an MCP client calling the table's readState
// (a real domain read):
//
//   - latency: a call sent to its session's owner and one sent to another
//     replica, which forwards it, alternating in one loop; added-p50-µs
//     and added-p99-µs are what forwarding costs;
//   - throughput-balancer: calls/s through a round-robin balancer without
//     stickiness (two calls in three are forwarded);
//   - throughput-direct: the same load sent straight to each owner.
func BenchmarkReplicas(b *testing.B) {
	const sessions = 100
	c := newCluster(b, 3)
	lb, err := lbtest.New(c.nodes[0].srv.URL, c.nodes[1].srv.URL, c.nodes[2].srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(lb.Close)
	front := httptest.NewServer(lb)
	b.Cleanup(front.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)

	type sess struct{ viaLB, direct, other *mcp.ClientSession }
	all := make([]sess, sessions)
	for i := range all {
		owner, other := c.nodes[i%3], c.nodes[(i+1)%3]
		s, err := owner.app.NewSession(console.SessionOptions{KeepShown: true})
		if err != nil {
			b.Fatal(err)
		}
		all[i] = sess{
			viaLB:  mcpAt(b, tr, front.URL+"/mcp", s.Token()),
			direct: mcpAt(b, tr, owner.mcpURL(), s.Token()),
		}
		if i == 0 {
			all[i].other = mcpAt(b, tr, other.mcpURL(), s.Token())
		}
	}
	list, err := all[0].direct.ListTools(bg, nil)
	if err != nil {
		b.Fatal(err)
	}
	name := ""
	for _, t := range list.Tools {
		if agent.FromMCP(t).CapabilityID == "view:devices.table.readState" {
			name = t.Name
		}
	}
	if name == "" {
		b.Fatal("no readState tool")
	}
	call := func(cs *mcp.ClientSession) {
		res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			b.Fatalf("readState: %v %+v", err, res)
		}
	}

	b.Run("latency", func(b *testing.B) {
		direct := make([]time.Duration, 0, b.N)
		forwarded := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			call(all[0].direct)
			mid := time.Now()
			call(all[0].other)
			direct, forwarded = append(direct, mid.Sub(start)), append(forwarded, time.Since(mid))
		}
		d50, d99 := percentiles(b, "direct", direct)
		f50, f99 := percentiles(b, "forwarded", forwarded)
		b.ReportMetric(f50-d50, "added-p50-µs")
		b.ReportMetric(f99-d99, "added-p99-µs")
	})
	for _, via := range []string{"balancer", "direct"} {
		b.Run("throughput-100-sessions-"+via, func(b *testing.B) {
			var next atomic.Uint64
			b.SetParallelism(4) // 8 callers on 2 cores keep the replicas busy
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s := all[next.Add(1)%sessions]
					if via == "balancer" {
						call(s.viaLB)
					} else {
						call(s.direct)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
