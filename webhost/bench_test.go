package webhost_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPObservation measures tools/call round trips of an
// observation (the notes board's read) over Streamable HTTP on loopback
// with the go-sdk client, one client per session, all sessions calling
// at once, through the Host's MCP endpoint and guard. With pages=1 each
// session also has its page's event stream open, as a browser leaves it.
// It reports throughput, p50 and p99 latency, CPU time per call (client
// and server: this whole process) and the live heap, the figures of the
// devices console's BenchmarkToolsCall and load harness.
func BenchmarkMCPObservation(b *testing.B) {
	for _, c := range []struct{ sessions, pages int }{{1, 0}, {100, 0}, {100, 1}} {
		b.Run(fmt.Sprintf("sessions=%d/pages=%d", c.sessions, c.pages), func(b *testing.B) {
			a := newApp(b, webhost.Options{})
			calls := make([]func(context.Context) error, c.sessions)
			for i := range calls {
				var s *webhost.Session
				if c.pages > 0 {
					br := a.browser(b)
					s = br.page()
					br.open(false, "notes", "count")
				} else {
					s = a.session(b)
				}
				boardOf(s).add("a note")
				cs := a.dial(b, s.Token(), sessionless)
				name := toolName(b, cs, "view:notes.board.read")
				calls[i] = func(ctx context.Context) error {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
					if err == nil && res.IsError {
						err = fmt.Errorf("%s: error result", name)
					}
					return err
				}
			}
			measure(b, calls)
		})
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
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/call")
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
