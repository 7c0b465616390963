package otelsurface_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/otelsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// The metrics after a scripted sequence of calls: counts by capability
// and outcome, durations, queue waits, pending confirmations, decision
// latency and live registrations. Metric attributes stay bounded: no
// invocation, instance, registration or consumer ids, and capability ids
// that name nothing are counted as _OTHER. AS-OBSV-001.
func TestMetricsAfterScriptedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, &otelsurface.Options{ConsumerID: true}) // spans only: metrics never carry it
		var denied string                                          // registration id
		deny := surface.Policy{Name: "deny-w2", Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
			if pc.RegistrationID == denied {
				return surface.Fail(surface.NewError(surface.CodeNotAuthorized, "", nil))
			}
			return next(ctx)
		}}
		reg := surface.New(&surface.Options{Telemetry: h.tel.Telemetry(), Policies: []surface.Policy{deny}})
		w1 := surfacetest.MustRegister(t, reg, widget("w1", func(context.Context) error {
			time.Sleep(100 * time.Millisecond) // virtual
			return nil
		}))
		w2 := surfacetest.MustRegister(t, reg, widget("w2", nil))
		denied = w2.ID()
		surfacetest.MustRegister(t, reg, surface.Component{Type: "obs.other", Description: "Other",
			Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads a number", 1)}})
		ctx := context.Background()

		for range 3 { // ok, 100ms each
			surfacetest.RequireOK(t, reg.Invoke(ctx, call(setID, w1.ID(), ""), agent))
		}
		surfacetest.RequireCode(t, reg.Invoke(ctx, call(setID, w2.ID(), ""), agent), surface.CodeNotAuthorized)
		bad := call(setID, w1.ID(), "")
		bad.Input = json.RawMessage(`{"ids":7}`)
		surfacetest.RequireCode(t, reg.Invoke(ctx, bad, agent), surface.CodeInvalidInput)
		for _, id := range []string{"view:made.up.thing", "view:another.made.up", "garbage"} {
			surfacetest.RequireCode(t, reg.Invoke(ctx, surface.Invocation{CapabilityID: id}, agent), surface.CodeCapabilityNotFound)
		}
		surfacetest.RequireOK(t, reg.Invoke(ctx, surface.Invocation{CapabilityID: "view:obs.other.read"}, surface.InvokeOptions{}))
		// Two confirmation requests: one approved after 10s, one pending.
		cid := surfacetest.RequireCode(t, reg.Invoke(ctx, call(wipeID, w1.ID(), ""), agent), surface.CodeConfirmationRequired).Details["confirmationId"].(string)
		second := call(wipeID, w1.ID(), "")
		second.Input = json.RawMessage(`{"ids":["d2"]}`)
		surfacetest.RequireCode(t, reg.Invoke(ctx, second, agent), surface.CodeConfirmationRequired)
		time.Sleep(10 * time.Second)
		reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
		w2.Unregister()

		m := h.metrics(t)
		const (
			w     = "agentsurface.capability.id=" + setID + ",agentsurface.capability.kind=action,agentsurface.consumer.kind=mcp-bridge,"
			wipe  = "agentsurface.capability.id=" + wipeID + ",agentsurface.capability.kind=action,agentsurface.consumer.kind=mcp-bridge,"
			read  = "agentsurface.capability.id=view:obs.other.read,agentsurface.capability.kind=observation,agentsurface.consumer.kind=embedded,"
			other = "agentsurface.capability.id=_OTHER,agentsurface.consumer.kind=mcp-bridge,"
		)
		requireSeries(t, m, "agentsurface.invocations", map[string]point{
			w + "agentsurface.result.status=ok":                                                     {value: 3},
			w + "agentsurface.error.code=NOT_AUTHORIZED,agentsurface.result.status=error":           {value: 1},
			w + "agentsurface.error.code=INVALID_INPUT,agentsurface.result.status=error":            {value: 1},
			other + "agentsurface.error.code=CAPABILITY_NOT_FOUND,agentsurface.result.status=error": {value: 3},
			read + "agentsurface.result.status=ok":                                                  {value: 1},
			wipe + "agentsurface.error.code=CONFIRMATION_REQUIRED,agentsurface.result.status=error": {value: 2},
		})
		requireSeries(t, m, "agentsurface.invocation.duration", map[string]point{
			w + "agentsurface.result.status=ok":                                                     {count: 3, sum: 0.3},
			w + "agentsurface.error.code=NOT_AUTHORIZED,agentsurface.result.status=error":           {count: 1},
			w + "agentsurface.error.code=INVALID_INPUT,agentsurface.result.status=error":            {count: 1},
			other + "agentsurface.error.code=CAPABILITY_NOT_FOUND,agentsurface.result.status=error": {count: 3},
			read + "agentsurface.result.status=ok":                                                  {count: 1},
			wipe + "agentsurface.error.code=CONFIRMATION_REQUIRED,agentsurface.result.status=error": {count: 2},
		})
		// Only the calls that reached admission wait in a queue.
		requireSeries(t, m, "agentsurface.invocation.queue_wait", map[string]point{
			"agentsurface.capability.id=" + setID + ",agentsurface.capability.kind=action":            {count: 3},
			"agentsurface.capability.id=view:obs.other.read,agentsurface.capability.kind=observation": {count: 1},
		})
		requireSeries(t, m, "agentsurface.confirmations.pending", map[string]point{"agentsurface.capability.id=" + wipeID: {value: 1}})
		requireSeries(t, m, "agentsurface.confirmation.decision.duration", map[string]point{
			"agentsurface.capability.id=" + wipeID + ",agentsurface.confirmation.outcome=approved": {count: 1, sum: 10},
		})
		requireSeries(t, m, "agentsurface.registrations.live", map[string]point{
			"agentsurface.component.type=obs.widget": {value: 1},
			"agentsurface.component.type=obs.other":  {value: 1},
		})
		for name, series := range m {
			for s := range series {
				for _, banned := range []string{"invocation.id", "instance.id", "registration.id", "consumer.id", "session-7", "made.up"} {
					if strings.Contains(s, banned) {
						t.Errorf("metric %s has a series %q with %s", name, s, banned)
					}
				}
			}
		}

		// Close expires the pending request and removes the registrations.
		if err := reg.Close(); err != nil {
			t.Fatal(err)
		}
		m = h.metrics(t)
		requireSeries(t, m, "agentsurface.confirmations.pending", map[string]point{"agentsurface.capability.id=" + wipeID: {value: 0}})
		requireSeries(t, m, "agentsurface.registrations.live", map[string]point{
			"agentsurface.component.type=obs.widget": {value: 0},
			"agentsurface.component.type=obs.other":  {value: 0},
		})
		expired := m["agentsurface.confirmation.decision.duration"]["agentsurface.capability.id="+wipeID+",agentsurface.confirmation.outcome=expired"]
		if expired.count != 1 || expired.sum != 10 {
			t.Fatalf("expired decision = %+v, want one after 10s", expired)
		}
	})
}

// requireSeries fails unless the metric has exactly the wanted series; a
// histogram's sum is checked when the wanted one is not zero.
func requireSeries(t *testing.T, m map[string]map[string]point, name string, want map[string]point) {
	t.Helper()
	got := m[name]
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("%s series:\n got %v\nwant %v", name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for s, w := range want {
		g := got[s]
		if g.value != w.value || g.count != w.count || (w.sum != 0 && !near(g.sum, w.sum)) {
			t.Errorf("%s{%s} = %+v, want %+v", name, s, g, w)
		}
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// A caller choosing capability ids cannot mint label values or span
// names: thousands of made-up ids, refused for every reason a made-up id
// can be (not found, an unmounted registration's id, a live
// registration's id, a hidden capability), give one fallback series and
// one span name, while the registered capabilities keep theirs.
// AS-OBSV-001, AS-POLICY-003.
func TestCallerChosenIDsStayBounded(t *testing.T) {
	h := newHarness(t, nil)
	hide := surface.Policy{Name: "hide", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Hide() }}
	reg := h.registry(t, nil)
	gone := surfacetest.MustRegister(t, reg, widget("w1", nil))
	gone.Unregister()
	live := surfacetest.MustRegister(t, reg, widget("w2", nil))
	secret := widget("w3", nil)
	secret.Type, secret.Policies = "obs.secret", []surface.Policy{hide}
	surfacetest.MustRegister(t, reg, secret)
	ctx := context.Background()
	const n = 1000
	for i := range n {
		made := "view:obs.widget.made" + strconv.Itoa(i)
		for _, in := range []surface.Invocation{
			{CapabilityID: made},                                                        // not found
			{CapabilityID: made, RegistrationID: gone.ID()},                             // an unmounted registration
			{CapabilityID: "domain:made." + strconv.Itoa(i), RegistrationID: live.ID()}, // a live one
			{CapabilityID: "view:obs.secret.made" + strconv.Itoa(i)},                    // beside a hidden one
		} {
			if res := reg.Invoke(ctx, in, agent); res.Error == nil {
				t.Fatalf("%+v succeeded", in)
			}
		}
	}
	// A registered capability, refused because its registration was
	// replaced, keeps its id; so does a resolved call.
	surfacetest.RequireCode(t, reg.Invoke(ctx, call(setID, gone.ID(), ""), agent), surface.CodeStaleCapability)
	surfacetest.RequireOK(t, reg.Invoke(ctx, call(setID, live.ID(), ""), agent))

	names := map[string]int{}
	for _, s := range h.spans.GetSpans() {
		names[s.Name]++
	}
	if len(names) != 2 || names["invoke"] != 4*n || names["invoke "+setID] != 2 {
		t.Fatalf("span names %v", names)
	}
	labels := map[string]bool{}
	for series := range h.metrics(t)["agentsurface.invocations"] {
		for _, kv := range strings.Split(series, ",") {
			if v, ok := strings.CutPrefix(kv, "agentsurface.capability.id="); ok {
				labels[v] = true
			}
		}
	}
	if len(labels) != 2 || !labels["_OTHER"] || !labels[setID] {
		t.Fatalf("capability labels %v", labels)
	}
}
