package replica_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/internal/pgtest"
	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// percentiles reports the p50 and p99 of ds, in µs, as name-p50-µs and
// name-p99-µs.
func percentiles(b *testing.B, name string, ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Nanoseconds()) / 1e3
	}
	p50, p99 = at(0.50), at(0.99)
	b.ReportMetric(p50, name+"-p50-µs")
	b.ReportMetric(p99, name+"-p99-µs")
	return p50, p99
}

func get(b *testing.B, c *http.Client, url, tok string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("status %d", res.StatusCode)
	}
}

// BenchmarkForwardingLatency measures a plain HTTP request sent to its
// session's owner (direct) and one sent to another replica, which
// forwards it (forwarded), alternating in one loop so that both see the
// same machine. added-p50-µs is what forwarding costs at the median.
func BenchmarkForwardingLatency(b *testing.B) {
	nodes, _, _ := three(b, nodeOptions{})
	c := client(b)
	tok := newSession(b, c, nodes[0].addr)
	get(b, c, nodes[1].addr+"/hit", tok) // the owner is looked up once, then remembered
	direct := make([]time.Duration, 0, b.N)
	forwarded := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		get(b, c, nodes[0].addr+"/hit", tok)
		mid := time.Now()
		get(b, c, nodes[1].addr+"/hit", tok)
		direct, forwarded = append(direct, mid.Sub(start)), append(forwarded, time.Since(mid))
	}
	b.StopTimer()
	d50, d99 := percentiles(b, "direct", direct)
	f50, f99 := percentiles(b, "forwarded", forwarded)
	b.ReportMetric(f50-d50, "added-p50-µs")
	b.ReportMetric(f99-d99, "added-p99-µs")
}

// BenchmarkMCPCalls measures MCP tools/call over three replicas with 100
// sessions (stateful MCP sessions of the go-sdk client): calls/s through
// a round-robin balancer (two calls in three land on a replica that does
// not own the session and are forwarded) and straight to the owners; and
// p50/p99 of a call sent to its owner against one sent to another
// replica, alternating in one loop.
func BenchmarkMCPCalls(b *testing.B) {
	const sessions = 100
	nodes, lb, _ := three(b, nodeOptions{})
	c := client(b)
	type sess struct {
		viaLB, direct, other *mcp.ClientSession
	}
	all := make([]sess, sessions)
	for i := range all {
		owner := nodes[i%3]
		tok := newSession(b, c, owner.addr)
		all[i].viaLB = mcpClient(b, c, lb.url, tok, "2025-11-25", nil)
		all[i].direct = mcpClient(b, c, owner.addr, tok, "2025-11-25", nil)
		if i == 0 {
			all[i].other = mcpClient(b, c, nodes[1].addr, tok, "2025-11-25", nil)
		}
	}
	tools, err := all[0].viaLB.ListTools(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	name := tools.Tools[0].Name
	call := func(cs *mcp.ClientSession) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}

	b.Run("latency", func(b *testing.B) {
		direct := make([]time.Duration, 0, b.N)
		forwarded := make([]time.Duration, 0, b.N)
		for range b.N {
			start := time.Now()
			call(all[0].direct)
			mid := time.Now()
			call(all[0].other)
			direct, forwarded = append(direct, mid.Sub(start)), append(forwarded, time.Since(mid))
		}
		b.StopTimer()
		d50, d99 := percentiles(b, "direct", direct)
		f50, f99 := percentiles(b, "forwarded", forwarded)
		b.ReportMetric(f50-d50, "added-p50-µs")
		b.ReportMetric(f99-d99, "added-p99-µs")
	})
	// The same load through the balancer (two calls in three forwarded)
	// and straight to each session's owner (a balancer that knew).
	for _, via := range []string{"balancer", "direct"} {
		b.Run("throughput-100-sessions-"+via, func(b *testing.B) {
			var next atomic.Uint64
			b.SetParallelism(4) // 8 callers on 2 cores: enough to keep the replicas busy
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

// BenchmarkAuditSink measures the audit records committed per second by
// callers recording at once (64, then 256), with the asynchronous sink
// (Record queues; the clock stops once the writer has written every
// record) and the durable one (each Record returns once its record is
// committed; concurrent records share a statement). The record is a
// call's settlement at metadata level, as most are, each with its own
// time and invocation id, and every run starts from an empty table, so
// that runs compare. The server flushes its log at every commit, as a
// production server does (see flushing). The durable sink's throughput
// is its callers divided by a commit's latency, so it grows with them.
func BenchmarkAuditSink(b *testing.B) {
	pool, _ := flushing(b)
	ms := int64(3)
	ev := surface.AuditEvent{At: time.Now(), Type: surface.AuditInvocationSettled, CapabilityID: "view:devices.table.selectRows",
		RegistrationID: "reg_0123456789", InvocationID: "inv_0123456789abcdef", ConsumerID: "mcp-bridge:agent",
		Status: surface.StatusOK, DurationMs: &ms, ExecutionMs: &ms}
	for _, callers := range []int{64, 256} {
		for _, mode := range []string{"async", "durable"} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode, callers), func(b *testing.B) {
				sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "bench", Durable: mode == "durable",
					QueueSize: b.N + 1}) // the asynchronous sink drops nothing
				defer sink.Close()
				session := sink.For("s_0123456789")
				b.ReportAllocs()
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				emptyAudit(b, pool)
				var caller atomic.Uint64
				cpu := startCPU(b, pool)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					// Each record has its own time and invocation id, as
					// real ones do (identical keys would make every
					// index insert land in one posting list).
					ev, prefix, n := ev, "inv_"+strconv.FormatUint(caller.Add(1), 10)+"_", 0
					for pb.Next() {
						n++
						ev.At, ev.InvocationID = time.Now(), prefix+strconv.Itoa(n)
						if err := session.Record(context.Background(), ev); err != nil {
							b.Error(err)
							return
						}
					}
				})
				allWritten(b, sink, uint64(b.N))
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				cpu.report(b, "record")
			})
		}
	}
}

// BenchmarkAuditedCalls measures calls answered per second by one
// replica whose calls each record their settlement (the app's /hit), 64
// then 256 clients at once, each with its own session: with the
// asynchronous audit sink and with the durable one, whose calls are
// answered only once their record is committed. The server flushes its
// log at every commit (see flushing). With the asynchronous sink 64
// clients already keep the replica's CPU busy; with the durable one each
// call also waits for a commit, so it takes more calls in flight for the
// replica to reach its throughput: compare the two modes at the same
// number of clients.
func BenchmarkAuditedCalls(b *testing.B) {
	_, url := flushing(b)
	for _, clients := range []int{64, 256} {
		for _, mode := range []string{"async", "durable"} {
			b.Run(fmt.Sprintf("%s/clients=%d", mode, clients), func(b *testing.B) {
				n := startNode(b, url, "bench-"+mode, nodeOptions{audit: true, durableAudit: mode == "durable", log: quiet})
				c := client(b)
				toks := make([]string, clients)
				for i := range toks {
					toks[i] = newSession(b, c, n.addr)
				}
				var next atomic.Uint64
				b.ReportAllocs()
				b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
				cpu := startCPU(b, n.pool)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					tok := toks[int(next.Add(1)-1)%clients]
					for pb.Next() {
						get(b, c, n.addr+"/hit", tok)
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
				cpu.report(b, "call")
				if st := n.app.audit.Stats(); st.Dropped != 0 {
					b.Fatalf("audit: %+v", st)
				}
			})
		}
	}
}

// BenchmarkAuditedInvoke measures registry calls settled per second, 64
// then 256 callers at once, by a registry whose audit goes to the sink:
// asynchronous, and durable. A call of an action at the default audit
// level records two records, invocation-started before its handler runs
// and invocation-settled before Invoke returns, and the durable sink
// makes it wait for the commit of each. The action does nothing and
// runs in parallel, so that what is measured is the audit; the server
// flushes its log at every commit (see flushing).
func BenchmarkAuditedInvoke(b *testing.B) {
	pool, _ := flushing(b)
	type none struct{}
	for _, callers := range []int{64, 256} {
		for _, mode := range []string{"async", "durable"} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode, callers), func(b *testing.B) {
				sink := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: "bench", Durable: mode == "durable",
					QueueSize: 2*b.N + 1}) // the asynchronous sink drops nothing
				defer sink.Close()
				reg := surface.New(&surface.Options{Audit: sink.For("s_0123456789")})
				defer reg.Close()
				_, err := reg.Register(surface.Component{Type: "devices.table", Description: "Devices", Actions: map[string]surface.Capability{
					"touch": surface.Action(surface.ActionDef[none, none]{
						Description: "Touch", Effect: surface.EffectLocalState,
						Concurrency: surface.Concurrency[none]{Mode: surface.ConcurrencyParallel, Max: callers},
						Execute:     func(context.Context, *surface.Call, none) (none, error) { return none{}, nil },
					}),
				}})
				if err != nil {
					b.Fatal(err)
				}
				emptyAudit(b, pool)
				var caller atomic.Uint64
				b.ReportAllocs()
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				cpu := startCPU(b, pool)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					consumer := surface.InvokeOptions{Consumer: surface.Consumer{ID: "agent-" + strconv.FormatUint(caller.Add(1), 10), Kind: surface.ConsumerEmbedded}}
					for n := 0; pb.Next(); n++ {
						res := reg.Invoke(context.Background(), surface.Invocation{InvocationID: "inv-" + strconv.Itoa(n),
							CapabilityID: "view:devices.table.touch", Input: json.RawMessage(`{}`)}, consumer)
						if res.Error != nil {
							b.Error(res.Error)
							return
						}
					}
				})
				allWritten(b, sink, 2*uint64(b.N)+1) // two records a call, and the registration's
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
				cpu.report(b, "call")
			})
		}
	}
}

// emptyAudit empties the audit table, so that every run starts from the
// same table.
func emptyAudit(b *testing.B, pool *pgxpool.Pool) {
	if _, err := pool.Exec(context.Background(), `TRUNCATE agentsurface_audit`); err != nil {
		b.Fatal(err)
	}
}

// allWritten waits until sink has written n records (an asynchronous
// sink writes what is queued after its Records returned), stops the
// clock and fails b if any record was dropped.
func allWritten(b *testing.B, sink *replica.AuditSink, n uint64) {
	for st := sink.Stats(); st.Written+st.Dropped < n; st = sink.Stats() {
		time.Sleep(100 * time.Microsecond) // the step of a poll on the condition
	}
	b.StopTimer()
	if st := sink.Stats(); st.Dropped != 0 {
		b.Fatalf("records dropped: %+v", st)
	}
}

// flushing returns a pool on a fresh, migrated database of a private
// server that flushes its log at every commit (fsync on, as PostgreSQL's
// default and production servers are), for the benchmarks of what a
// commit costs: on the test servers, which never flush, a commit costs a
// fraction of what it does in production, and the durable audit sink
// would look faster than it is.
func flushing(b *testing.B) (*pgxpool.Pool, string) {
	b.Helper()
	url := pgtest.StartServer(b, &pgtest.ServerOptions{Flush: true}).Database(b)
	pool := openPool(b, url)
	if err := replica.Migrate(context.Background(), pool); err != nil {
		b.Fatal(err)
	}
	return pool, url
}

// quiet discards a benchmark node's log.
var quiet = slog.New(slog.DiscardHandler)

// cpuClock measures the CPU time this process and the Postgres server
// spend during a benchmark, where it can (Linux, the server on this
// machine): on a machine other work keeps busy, the CPU time an operation
// costs varies much less than the operations per second.
type cpuClock struct {
	pool  *pgxpool.Pool
	start map[int]time.Duration // CPU time so far of this process (0) and the server's processes
	ok    bool
}

// startCPU starts a cpuClock for this process and the server pool talks
// to.
func startCPU(b *testing.B, pool *pgxpool.Pool) *cpuClock {
	c := &cpuClock{pool: pool}
	c.start, c.ok = c.read(b)
	return c
}

// read returns the CPU time so far of this process (key 0) and of each
// process of the server.
func (c *cpuClock) read(b *testing.B) (map[int]time.Duration, bool) {
	rows, err := c.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	cpu := map[int]time.Duration{}
	for _, pid := range append([]int32{0}, pids...) {
		file := fmt.Sprintf("/proc/%d/stat", pid)
		if pid == 0 {
			file = "/proc/self/stat"
		}
		stat, err := os.ReadFile(file)
		if err != nil {
			return nil, false
		}
		// The command (2nd field) ends with ')'; utime and stime, in
		// clock ticks of 10 ms, are the 14th and 15th fields.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if pid != 0 && !strings.HasSuffix(string(stat[:bytes.LastIndexByte(stat, ')')]), "(postgres") {
			return nil, false // not the server's process: the server is elsewhere
		}
		for _, v := range f[11:13] {
			n, _ := strconv.ParseInt(v, 10, 64)
			cpu[int(pid)] += time.Duration(n) * 10 * time.Millisecond
		}
	}
	return cpu, true
}

// report reports the CPU time per operation, in µs, of this process and
// the server together (cpu-µs/<unit>) and of the server alone
// (pg-cpu-µs/<unit>). A server process that started meanwhile counts
// whole; one that ended is missed.
func (c *cpuClock) report(b *testing.B, unit string) {
	end, ok := c.read(b)
	if !ok || !c.ok || b.N == 0 {
		return
	}
	var proc, server time.Duration
	for pid, t := range end {
		if pid == 0 {
			proc = t - c.start[0]
		} else {
			server += t - c.start[pid] // 0 for a process that started meanwhile
		}
	}
	b.ReportMetric(float64(proc+server)/float64(b.N)/1e3, "cpu-µs/"+unit)
	b.ReportMetric(float64(server)/float64(b.N)/1e3, "pg-cpu-µs/"+unit)
}
