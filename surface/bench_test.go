package surface_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

type benchOut struct {
	N float64 `json:"n"`
}

type benchIn struct {
	IDs []string `json:"ids"`
}

// benchComponents returns n components, each with one observation whose
// output is {n: number} and one action whose input is {ids: string[]}.
func benchComponents(n int) []surface.Component {
	obs := surface.Observation(surface.ObservationDef[benchOut]{
		Description: "Reads n",
		Read:        func(context.Context, *surface.Call) (benchOut, error) { return benchOut{N: 1}, nil },
	})
	act := surface.Action(surface.ActionDef[benchIn, surface.None]{
		Description: "Selects ids",
		Effect:      surface.EffectLocalState,
		Execute:     func(context.Context, *surface.Call, benchIn) (surface.None, error) { return surface.None{}, nil },
	})
	comps := make([]surface.Component, n)
	for i := range comps {
		comps[i] = surface.Component{
			Type:         "bench.widget",
			InstanceID:   "w" + strconv.Itoa(i),
			Description:  "Benchmark widget",
			Observations: map[string]surface.Capability{"readState": obs},
			Actions:      map[string]surface.Capability{"selectRows": act},
		}
	}
	return comps
}

func BenchmarkNewRegistry(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = surface.New(nil)
	}
}

func BenchmarkRegisterUnregister(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			comps := benchComponents(n)
			reg := surface.New(nil)
			defer reg.Close()
			handles := make([]*surface.Handle, n)
			b.ReportAllocs()
			for b.Loop() {
				for i := range comps {
					h, err := reg.Register(comps[i])
					if err != nil {
						b.Fatal(err)
					}
					handles[i] = h
				}
				for _, h := range handles {
					h.Unregister()
				}
			}
		})
	}
}

func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			reg := surface.New(nil)
			defer reg.Close()
			for _, c := range benchComponents(n) {
				if _, err := reg.Register(c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if s := reg.Snapshot(surface.SnapshotOptions{}); len(s.Components) != n {
					b.Fatal(len(s.Components))
				}
			}
		})
	}
}

// BenchmarkSnapshotCopyFloor measures the least work a snapshot of n
// components does when it hands out its own copies (DESIGN: "a snapshot
// copies slices/maps it hands out"): three allocations and one copy of
// each descriptor, without computing anything. BenchmarkSnapshot is
// bounded below by it.
func BenchmarkSnapshotCopyFloor(b *testing.B) {
	reg := surface.New(nil)
	defer reg.Close()
	for _, c := range benchComponents(100) {
		if _, err := reg.Register(c); err != nil {
			b.Fatal(err)
		}
	}
	src := reg.Snapshot(surface.SnapshotOptions{}).Components
	b.ReportAllocs()
	for b.Loop() {
		comps := make([]surface.ComponentDescriptor, len(src))
		obs := make([]surface.ObservationDescriptor, len(src))
		acts := make([]surface.ActionDescriptor, len(src))
		for i := range src {
			comps[i] = src[i]
			obs[i], acts[i] = src[i].Observations[0], src[i].Actions[0]
			comps[i].Observations, comps[i].Actions = obs[i:i+1:i+1], acts[i:i+1:i+1]
		}
		copySink = comps
	}
}

// copySink keeps BenchmarkSnapshotCopyFloor's copies alive, as a caller
// keeps a snapshot.
var copySink []surface.ComponentDescriptor

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHeapPerRegistry reports the retained heap of an empty registry
// (over 10,000 registries) as B/registry.
func BenchmarkHeapPerRegistry(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		before := heapInUse()
		regs := make([]*surface.Registry, n)
		for i := range regs {
			regs[i] = surface.New(nil)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "B/registry")
		runtime.KeepAlive(regs)
	}
}

// BenchmarkHeapPerComponent reports the retained heap of one registered
// component (over 1,000 components) as B/component.
func BenchmarkHeapPerComponent(b *testing.B) {
	const n = 1000
	comps := benchComponents(n)
	for b.Loop() {
		reg := surface.New(nil)
		before := heapInUse()
		for i := range comps {
			if _, err := reg.Register(comps[i]); err != nil {
				b.Fatal(err)
			}
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "B/component")
		runtime.KeepAlive(reg)
		_ = reg.Close()
	}
}

// BenchmarkMemorySink records an invocation-settled record from one
// goroutine (serial) and from GOMAXPROCS goroutines (parallel; ns/op is
// wall time per record across all of them). Every invocation records two.
func BenchmarkMemorySink(b *testing.B) {
	ms := int64(1)
	e := surface.AuditEvent{Type: surface.AuditInvocationSettled, CapabilityID: benchAction, RegistrationID: "bench.widget#w0~1abcdef",
		InvocationID: "inv_0123456789ab", ConsumerID: "test:bench", Status: surface.StatusOK, DurationMs: &ms, ExecutionMs: &ms}
	b.Run("serial", func(b *testing.B) {
		var sink surface.MemorySink
		for b.Loop() {
			_ = sink.Record(bg, e)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var sink surface.MemorySink
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = sink.Record(bg, e)
			}
		})
	})
}

// BenchmarkHeapPerInvokedRegistry reports the retained heap of a registry
// with one component after 1,000 action invocations with fresh ids (over
// 100 registries), as B/registry: what a user session keeps once it has
// been used. Each call's capability id is a string of its own, as one
// decoded from a request is.
//
// "default" has the spec's defaults: a MemorySink of 1,000 records and a
// dedupe cache of 200 entries (semantics §14, §18). The other two split
// that figure: "audit" keeps the sink and shrinks the dedupe cache to one
// entry, "dedupe" keeps the cache and discards audit records.
func BenchmarkHeapPerInvokedRegistry(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts func() *surface.Options
	}{
		{"default", func() *surface.Options { return nil }},
		{"audit", func() *surface.Options { return &surface.Options{Limits: surface.Limits{DedupeCacheSize: 1}} }},
		{"dedupe", func() *surface.Options { return &surface.Options{Audit: discardSink{}} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 100
			comp := benchComponents(1)[0]
			ctx := context.Background()
			for b.Loop() {
				before := heapInUse()
				regs := make([]*surface.Registry, n)
				for i := range regs {
					reg := surface.New(bc.opts())
					h, err := reg.Register(comp)
					if err != nil {
						b.Fatal(err)
					}
					inv := surface.Invocation{CapabilityID: benchAction, RegistrationID: h.ID(), Input: benchInput}
					for range 1000 {
						inv.CapabilityID = strings.Clone(benchAction)
						if res := reg.Invoke(ctx, inv, benchConsumer); res.Error != nil {
							b.Fatal(res.Error)
						}
					}
					regs[i] = reg
				}
				after := heapInUse()
				b.ReportMetric(float64(after-before)/n, "B/registry")
				runtime.KeepAlive(regs)
			}
		})
	}
}

// discardSink drops every audit record.
type discardSink struct{}

func (discardSink) Record(context.Context, surface.AuditEvent) error { return nil }
