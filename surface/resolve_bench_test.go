package surface_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// resolveSizes are the numbers of same-type instances the resolution
// benchmarks run at: a call naming its registration or instance must
// cost the same at each.
var resolveSizes = []int{10, 100, 1000, 10_000}

// BenchmarkCatalogCall: a tool call through Catalog.Call, the path MCP
// uses (it sends the capability and registration id of the entry), to
// the action of one of n instances of one type (target: flat in n).
func BenchmarkCatalogCall(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, _ := benchInvokeRegistry(b, n, surface.Limits{})
			ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Consumer: benchConsumer.Consumer, Topology: surface.TopologyRemote})
			if err != nil {
				b.Fatal(err)
			}
			defer ts.Close()
			cat := ts.Catalog()
			var name string
			for _, t := range cat.Tools() {
				if t.CapabilityID == benchAction && t.InstanceID == "w"+strconv.Itoa(n/2) {
					name = t.Name
				}
			}
			ctx := context.Background()
			if res := cat.Call(ctx, name, benchInput, surface.CallOptions{}); res.Error != nil {
				b.Fatal(res.Error)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res := cat.Call(ctx, name, benchInput, surface.CallOptions{}); res.Error != nil {
					b.Fatal(res.Error)
				}
			}
		})
	}
}

// BenchmarkInvokeNamedInstance: Invoke naming the instance, without a
// registration id, among n instances of one type (target: flat in n).
func BenchmarkInvokeNamedInstance(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, _ := benchInvokeRegistry(b, n, surface.Limits{})
			benchInvokeLoop(b, reg, surface.Invocation{CapabilityID: benchAction, InstanceID: "w" + strconv.Itoa(n/2), Input: benchInput})
		})
	}
}

// BenchmarkInvokeReplacedRegistration: a call naming a registration that
// was replaced (STALE_CAPABILITY registration-replaced, which names the
// first live instance) among n instances of one type (target: flat in
// n).
func BenchmarkInvokeReplacedRegistration(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, hs := benchInvokeRegistry(b, n, surface.Limits{})
			old := hs[n/2].ID()
			hs[n/2].Unregister()
			if _, err := reg.Register(benchComponents(n)[n/2]); err != nil {
				b.Fatal(err)
			}
			benchStale(b, reg, surface.Invocation{CapabilityID: benchAction, RegistrationID: old, Input: benchInput}, "registration-replaced")
		})
	}
}

// BenchmarkInvokeReplacedRegistrationPolicy: BenchmarkInvokeReplacedRegistration
// under a registry policy with a Discover hook (a tenant boundary every
// instance passes), so that each candidate resolution looks at is judged
// by user code (target: flat in n).
func BenchmarkInvokeReplacedRegistrationPolicy(b *testing.B) {
	tenant := surface.TenantBoundary(func(map[string]any) string { return "t1" },
		func(pc *surface.PolicyContext) string { s, _ := pc.Internal["tenant"].(string); return s })
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg := surface.New(&surface.Options{Policies: []surface.Policy{tenant}})
			b.Cleanup(func() { _ = reg.Close() })
			comps := benchComponents(n)
			var old string
			for i, c := range comps {
				c.Internal = map[string]any{"tenant": "t1"}
				h, err := reg.Register(c)
				if err != nil {
					b.Fatal(err)
				}
				if i == n/2 {
					old = h.ID()
					h.Unregister()
					if _, err := reg.Register(c); err != nil {
						b.Fatal(err)
					}
				}
			}
			benchStale(b, reg, surface.Invocation{CapabilityID: benchAction, RegistrationID: old, Input: benchInput}, "registration-replaced")
		})
	}
}

// BenchmarkInvokeUnknownRegistration: a call naming a registration id
// the registry never issued (STALE_CAPABILITY surface-reloaded, which
// names the first live instance) among n instances of one type (target:
// flat in n).
func BenchmarkInvokeUnknownRegistration(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, _ := benchInvokeRegistry(b, n, surface.Limits{})
			benchStale(b, reg, surface.Invocation{CapabilityID: benchAction, RegistrationID: "reg_00zzAAAAAA", Input: benchInput}, "surface-reloaded")
		})
	}
}

// benchStale times inv, which must fail STALE_CAPABILITY with reason.
func benchStale(b *testing.B, reg *surface.Registry, inv surface.Invocation, reason string) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := reg.Invoke(ctx, inv, benchConsumer); res.Error == nil || res.Error.Code != surface.CodeStaleCapability || res.Error.Details["reason"] != reason {
			b.Fatalf("%+v", res)
		}
	}
}

// benchProcedure is the procedure every benchProcedureRegistry row
// references, bound to the row (a server query the executor answers with
// nothing).
const benchProcedure = "domain:bench.freeze"

// benchProcedureRegistry returns a registry with n bench rows (instances
// r0…r(n-1)), each referencing benchProcedure, and their handles.
func benchProcedureRegistry(b *testing.B, n int) (*surface.Registry, []*surface.Handle) {
	b.Helper()
	reg := surface.New(nil)
	b.Cleanup(func() { _ = reg.Close() })
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "bench.freeze", func(context.Context, *surface.ProcedureCall, surface.None) (surface.None, error) {
		return surface.None{}, nil
	})
	reg.SetProcedureExecutor(x)
	hs := make([]*surface.Handle, n)
	for i := range hs {
		instance := "r" + strconv.Itoa(i)
		ref := surface.Procedure(surface.ProcedureDef[surface.None, surface.None]{ID: benchProcedure, Description: "Freezes the row",
			Effect: surface.EffectServerQuery, Context: &surface.Parent{Type: "bench.row", InstanceID: instance}})
		h, err := reg.Register(surface.Component{Type: "bench.row", InstanceID: instance, Description: "Benchmark row",
			Procedures: []surface.Capability{ref}})
		if err != nil {
			b.Fatal(err)
		}
		hs[i] = h
	}
	return reg, hs
}

// BenchmarkInvokeProcedureNamedInstance: a procedure call naming the
// instance its reference is bound to, without a registration id, among
// n references (target: flat in n).
func BenchmarkInvokeProcedureNamedInstance(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, _ := benchProcedureRegistry(b, n)
			benchInvokeLoop(b, reg, surface.Invocation{CapabilityID: benchProcedure, InstanceID: "r" + strconv.Itoa(n/2)})
		})
	}
}

// BenchmarkInvokeProcedureNamedRegistration: a procedure call naming its
// reference's registration among n references (target: flat in n).
func BenchmarkInvokeProcedureNamedRegistration(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, hs := benchProcedureRegistry(b, n)
			benchInvokeLoop(b, reg, surface.Invocation{CapabilityID: benchProcedure, RegistrationID: hs[n/2].ID()})
		})
	}
}

// BenchmarkInvokeAmbiguous: a call naming neither registration nor
// instance among n instances, answered AMBIGUOUS_INSTANCE with all n: it
// grows with n, as its answer does.
func BenchmarkInvokeAmbiguous(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, _ := benchInvokeRegistry(b, n, surface.Limits{})
			inv := surface.Invocation{CapabilityID: benchAction, Input: benchInput}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := reg.Invoke(ctx, inv, benchConsumer); res.Error == nil || res.Error.Code != surface.CodeAmbiguousInstance {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}
