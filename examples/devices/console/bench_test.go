package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolsCall measures tools/call round trips over Streamable HTTP
// on loopback with the go-sdk client, one client per session, all
// sessions calling at once: through the console's /mcp endpoint (a no-op
// view action, sortBy by name, through the whole pipeline), and through a
// bare go-sdk server with one no-op tool, under the same load and client.
// It reports p50 and p99 latency and throughput.
func BenchmarkToolsCall(b *testing.B) {
	for _, sessions := range []int{1, 100} {
		b.Run(fmt.Sprintf("server=console/sessions=%d", sessions), func(b *testing.B) {
			d := newDemo(b, console.Options{Host: webhost.Options{MCP: webhost.MCPOptions{HTTP: mcpsurface.HTTPOptions{MaxSessions: 2}}}})
			calls := make([]func(context.Context) error, sessions)
			for i := range calls {
				calls[i] = caller(b, d.dial(b, d.session(b).Token()), "view_devices__table__sortBy")
			}
			measure(b, calls)
		})
		b.Run(fmt.Sprintf("server=bare/sessions=%d", sessions), func(b *testing.B) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "noop", Description: "Does nothing.", InputSchema: json.RawMessage(`{"type":"object","properties":{"column":{"type":"string"}}}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"ok"}`}}}, nil
				})
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
			b.Cleanup(hs.Close)
			calls := make([]func(context.Context) error, sessions)
			for i := range calls {
				// The same client as above, bearer header included.
				m, err := agent.Dial(bg, hs.URL, &agent.DialOptions{Token: "unused", HTTPClient: hs.Client()})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = m.Close() })
				calls[i] = caller(b, m, "noop")
			}
			measure(b, calls)
		})
	}
}

// caller returns a function calling tool with the go-sdk client session
// of m, failing on an error result.
func caller(b *testing.B, m *agent.MCP, tool string) func(context.Context) error {
	cs := m.Session()
	args := json.RawMessage(`{"column":"name"}`)
	return func(ctx context.Context) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err == nil && res.IsError {
			err = fmt.Errorf("%s: error result", tool)
		}
		return err
	}
}

// measure runs b.N calls spread over the callers, all at once, and
// reports latency percentiles and throughput.
func measure(b *testing.B, calls []func(context.Context) error) {
	lat := make([][]time.Duration, len(calls))
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i, call := range calls {
		n := b.N / len(calls)
		if i < b.N%len(calls) {
			n++
		}
		wg.Go(func() {
			for range n {
				t0 := time.Now()
				if err := call(bg); err != nil {
					b.Error(err)
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
	// CPU time per call (client and server, this whole process): less
	// sensitive than wall time to other work on a shared machine.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/call")
	// The live heap: the collector marks it on every cycle, and the SDK
	// allocates about 350 KB per round trip, so a larger one costs.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MiB")
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReadState is 100 sessions' MCP clients calling the table's
// readState at once (a domain read through the whole pipeline), each
// with its page open (its event stream read, pages=1) or not: the
// figure the console is compared by (issue 34).
func BenchmarkReadState(b *testing.B) {
	for _, pages := range []int{0, 1} {
		b.Run(fmt.Sprintf("sessions=100/pages=%d", pages), func(b *testing.B) {
			d := newDemo(b, console.Options{})
			calls := make([]func(context.Context) error, 100)
			for i := range calls {
				var s *console.Session
				if pages == 1 {
					var err error
					if s, err = d.app.NewSession(console.SessionOptions{}); err != nil {
						b.Fatal(err)
					}
					br := d.browser(b)
					if code, _ := br.get(s.JoinPath()); code != http.StatusSeeOther {
						b.Fatalf("join: %d", code)
					}
					br.events()
				} else {
					s = d.session(b)
				}
				cs := d.dial(b, s.Token()).Session()
				calls[i] = func(ctx context.Context) error {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "view_devices__table__readState", Arguments: json.RawMessage(`{}`)})
					if err == nil && res.IsError {
						err = fmt.Errorf("readState: an error result")
					}
					return err
				}
			}
			measure(b, calls)
		})
	}
}
