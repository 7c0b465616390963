package surface_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// The invoke benchmarks use the components of benchComponents: action
// selectRows takes {ids: string[]} and returns nothing, observation
// readState returns {n: number}; both handlers do nothing. Calls carry the
// registration id, as adapters do after discovery. The registry keeps its
// default limits (a 200-entry dedupe cache: fresh invocation ids evict an
// entry per call once it is full, which is part of the real cost) except
// where a benchmark says otherwise.

const (
	benchAction      = "view:bench.widget.selectRows"
	benchObservation = "view:bench.widget.readState"
)

var (
	benchInput    = json.RawMessage(`{"ids":["a"]}`)
	benchConsumer = surface.InvokeOptions{Consumer: surface.Consumer{ID: "bench", Kind: surface.ConsumerTest}}
)

// benchInvokeRegistry returns a registry with n bench widgets (instances
// w0…w(n-1)) and their handles, closed when the benchmark ends.
func benchInvokeRegistry(b *testing.B, n int, lim surface.Limits) (*surface.Registry, []*surface.Handle) {
	b.Helper()
	reg := surface.New(&surface.Options{Limits: lim})
	b.Cleanup(func() { _ = reg.Close() })
	hs := make([]*surface.Handle, n)
	for i, c := range benchComponents(n) {
		h, err := reg.Register(c)
		if err != nil {
			b.Fatal(err)
		}
		hs[i] = h
	}
	return reg, hs
}

// benchInvoke runs inv once outside the timed loop and fails unless ok.
func benchInvoke(b *testing.B, reg *surface.Registry, inv surface.Invocation) {
	b.Helper()
	if res := reg.Invoke(context.Background(), inv, benchConsumer); res.Error != nil {
		b.Fatalf("%s: %v", inv.CapabilityID, res.Error)
	}
}

// benchInvokeLoop times inv, called over and over, after one untimed call.
func benchInvokeLoop(b *testing.B, reg *surface.Registry, inv surface.Invocation) {
	benchInvoke(b, reg, inv)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := reg.Invoke(ctx, inv, benchConsumer); res.Error != nil {
			b.Fatal(res.Error)
		}
	}
}

// BenchmarkInvokeAction: a no-op action, a fresh minted invocation id per
// call (target ≤ 3 µs, ≤ 25 allocs).
func BenchmarkInvokeAction(b *testing.B) {
	reg, hs := benchInvokeRegistry(b, 1, surface.Limits{})
	benchInvokeLoop(b, reg, surface.Invocation{CapabilityID: benchAction, RegistrationID: hs[0].ID(), Input: benchInput})
}

// BenchmarkInvokeActionSurfaceListener: BenchmarkInvokeAction with a
// listener that follows surface changes only, as every Toolset and MCP
// server attaches one (target within 1.1× of BenchmarkInvokeAction).
func BenchmarkInvokeActionSurfaceListener(b *testing.B) {
	reg, hs := benchInvokeRegistry(b, 1, surface.Limits{})
	unsubscribe := reg.SubscribeTo(func(surface.Event) {}, surface.SurfaceChanged{})
	defer unsubscribe()
	benchInvokeLoop(b, reg, surface.Invocation{CapabilityID: benchAction, RegistrationID: hs[0].ID(), Input: benchInput})
}

// BenchmarkInvokeObservation: a no-op observation returning {n: 1}
// (target ≤ 2 µs).
func BenchmarkInvokeObservation(b *testing.B) {
	reg, hs := benchInvokeRegistry(b, 1, surface.Limits{})
	benchInvokeLoop(b, reg, surface.Invocation{CapabilityID: benchObservation, RegistrationID: hs[0].ID()})
}

// BenchmarkInvokeActionReusedID: the same invocation id every call, so
// every timed call is a replay of the cached result.
func BenchmarkInvokeActionReusedID(b *testing.B) {
	reg, hs := benchInvokeRegistry(b, 1, surface.Limits{})
	benchInvokeLoop(b, reg, surface.Invocation{InvocationID: "bench-reused", CapabilityID: benchAction, RegistrationID: hs[0].ID(), Input: benchInput})
}

// BenchmarkInvokeActionFreshID: explicit fresh invocation ids, made in
// batches outside the timed part (so unlike BenchmarkInvokeAction, minting
// is not measured).
func BenchmarkInvokeActionFreshID(b *testing.B) {
	reg, hs := benchInvokeRegistry(b, 1, surface.Limits{})
	inv := surface.Invocation{CapabilityID: benchAction, RegistrationID: hs[0].ID(), Input: benchInput}
	benchInvoke(b, reg, inv)
	ctx := context.Background()
	const batch = 1 << 14
	ids := make([]string, batch)
	next, made := batch, 0
	b.ReportAllocs()
	for b.Loop() {
		if next == batch {
			b.StopTimer()
			for i := range ids {
				made++
				ids[i] = "bench-" + strconv.Itoa(made)
			}
			next = 0
			b.StartTimer()
		}
		inv.InvocationID = ids[next]
		next++
		if res := reg.Invoke(ctx, inv, benchConsumer); res.Error != nil {
			b.Fatal(res.Error)
		}
	}
}

// BenchmarkInvokeParallel compares the throughput of no-op actions with
// fresh minted ids called from one goroutine (serial) and from
// GOMAXPROCS goroutines (instances=N). Actions serialize per instance, so
// each goroutine keeps to its own share of the N instances: goroutine g
// calls instances g, g+G, g+2G, … (mod N) in turn, G being the number of
// goroutines; with N a multiple of G no two goroutines share an instance.
// The serial baseline does the same work, round-robin over 8 instances.
// Throughput ratio = ns/op(serial) ÷ ns/op(instances=N) (target ≥ 1.6 on 2
// cores). The serial baseline runs with all cores available, so its
// garbage collection runs on an idle one; the ratio against one core
// proper is -cpu 1,2 on instances=2 (ns/op at -cpu 1 ÷ ns/op at -cpu 2).
// The action queue is made deep enough that goroutines sharing an
// instance (G > N) queue rather than fail RATE_LIMITED.
func BenchmarkInvokeParallel(b *testing.B) {
	lim := surface.Limits{ActionQueueDepth: 1024}
	invocations := func(hs []*surface.Handle) []surface.Invocation {
		invs := make([]surface.Invocation, len(hs))
		for i, h := range hs {
			invs[i] = surface.Invocation{CapabilityID: benchAction, InstanceID: "w" + strconv.Itoa(i), RegistrationID: h.ID(), Input: benchInput}
		}
		return invs
	}
	b.Run("serial", func(b *testing.B) {
		reg, hs := benchInvokeRegistry(b, 8, lim)
		invs := invocations(hs)
		for _, inv := range invs {
			benchInvoke(b, reg, inv)
		}
		ctx := context.Background()
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if res := reg.Invoke(ctx, invs[i], benchConsumer); res.Error != nil {
				b.Fatal(res.Error)
			}
			if i++; i == len(invs) {
				i = 0
			}
		}
	})
	for _, n := range []int{2, 8} {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, hs := benchInvokeRegistry(b, n, lim)
			invs := invocations(hs)
			for _, inv := range invs {
				benchInvoke(b, reg, inv)
			}
			ctx := context.Background()
			goroutines := runtime.GOMAXPROCS(0) // RunParallel's default parallelism
			var started atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(started.Add(1)-1) % n
				for pb.Next() {
					if res := reg.Invoke(ctx, invs[i], benchConsumer); res.Error != nil {
						b.Error(res.Error)
						return
					}
					i = (i + goroutines) % n
				}
			})
		})
	}
}
