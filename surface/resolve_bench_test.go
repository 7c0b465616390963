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
// first live instance) among n instances of one type (target: linear in
// n at worst, no sort).
func BenchmarkInvokeReplacedRegistration(b *testing.B) {
	for _, n := range resolveSizes {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			reg, hs := benchInvokeRegistry(b, n, surface.Limits{})
			old := hs[n/2].ID()
			hs[n/2].Unregister()
			if _, err := reg.Register(benchComponents(n)[n/2]); err != nil {
				b.Fatal(err)
			}
			inv := surface.Invocation{CapabilityID: benchAction, RegistrationID: old, Input: benchInput}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if res := reg.Invoke(ctx, inv, benchConsumer); res.Error == nil || res.Error.Code != surface.CodeStaleCapability {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}
