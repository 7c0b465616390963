package surface_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

var quiet = slog.New(slog.DiscardHandler)

// hideFrom is a policy hiding the capabilities whose id contains what from
// the consumer with id consumer.
func hideFrom(name, consumer, what string) surface.Policy {
	return surface.Policy{Name: name, Discover: func(pc *surface.PolicyContext) surface.Decision {
		if pc.Consumer.ID == consumer && strings.Contains(pc.CapabilityID, what) {
			return surface.Hide()
		}
		return surface.Expose()
	}}
}

// explained returns the explanation of capID in ex.
func explainedCap(t *testing.T, ex surface.Explanation, capID string) surface.CapabilityExplanation {
	t.Helper()
	for _, c := range ex.Capabilities {
		if c.CapabilityID == capID {
			return c
		}
	}
	t.Fatalf("%s is not explained: %+v", capID, ex.Capabilities)
	return surface.CapabilityExplanation{}
}

// AS-EXPLAIN-001: the explanation shows a capability the snapshot hides,
// with the policy that hid it.
func TestExplainShowsHiddenCapability_AS_EXPLAIN_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, &surface.Options{Policies: []surface.Policy{hideFrom("no-select-for-bob", "bob", "selectRows")}})
	h := surfacetest.MustRegister(t, reg, table("main", nil))
	bob := surface.Consumer{ID: "bob", Kind: surface.ConsumerMCPBridge}

	snap := reg.Snapshot(surface.SnapshotOptions{Consumer: bob})
	if acts := snap.Components[0].Actions; len(acts) != 0 {
		t.Fatalf("the snapshot shows the hidden action: %+v", acts)
	}
	ex := reg.Explain(surface.SnapshotOptions{Consumer: bob, OmitUnavailable: true, Budget: &surface.Budget{MaxComponents: 0}})
	if ex.Consumer.ID != "bob" || ex.SurfaceVersion != reg.Version() || ex.SurfaceID != reg.SurfaceID() {
		t.Fatalf("explanation header: %+v", ex)
	}
	c := explainedCap(t, ex, "view:devices.table.selectRows")
	want := surface.CapabilityExplanation{
		CapabilityID: "view:devices.table.selectRows", Kind: surface.KindAction, Plane: surface.PlaneView,
		Description: "Replace the selection", RegistrationID: h.ID(), ComponentType: "devices.table", InstanceID: "main",
		Outcome: surface.VisibilityHidden, View: surface.ViewHidden, Available: true,
		Policies: []surface.PolicyExplanation{{Name: "no-select-for-bob", Layer: surface.LayerRegistry, Hooks: []string{"discover"}, Vote: "hide"}},
	}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Fatalf("explained:\n got %+v\nwant %+v", c, want)
	}
	// Another consumer sees it; its explanation says so.
	if c := explainedCap(t, reg.Explain(surface.SnapshotOptions{}), "view:devices.table.selectRows"); c.Outcome != surface.VisibilityExposed || c.Policies[0].Vote != "expose" {
		t.Fatalf("for the anonymous consumer: %+v", c)
	}
}

// AS-EXPLAIN-002: every policy of a chain is attributed by name and layer
// (registry, component, guard, capability), in the order the hooks run,
// with its hooks and its vote; a panicking Discover is marked.
func TestExplainAttributesPoliciesByLayer_AS_EXPLAIN_002(t *testing.T) {
	noop := func(ctx context.Context, _ *surface.PolicyContext, next surface.Next) surface.Result {
		return next(ctx)
	}
	reg := surfacetest.NewRegistry(t, &surface.Options{
		Logger:   quiet,
		Context:  func() map[string]any { return map[string]any{"user": "u1"} },
		Policies: []surface.Policy{surface.Authenticated(""), {Name: "tenant", Authorize: noop}},
		OnRegister: func(surface.Candidate) surface.Verdict {
			return surface.Verdict{Policies: []surface.Policy{surface.RequireConfirmation(nil, nil)}}
		},
	})
	c := table("main", nil)
	c.Policies = []surface.Policy{{Name: "broken", Discover: func(*surface.PolicyContext) surface.Decision { panic("bug") }}}
	c.Actions["selectRows"] = surface.Action(surface.ActionDef[selectRows, surface.None]{
		Description: "Replace the selection", Effect: surface.EffectLocalState,
		Policies: []surface.Policy{{Name: "maintenance", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Disable("Maintenance until 10:00") }}},
		Execute:  func(context.Context, *surface.Call, selectRows) (surface.None, error) { return surface.None{}, nil },
	})
	surfacetest.MustRegister(t, reg, c)

	ex := reg.Explain(surface.SnapshotOptions{Consumer: surface.Consumer{ID: "u1", Kind: surface.ConsumerEmbedded}})
	act := explainedCap(t, ex, "view:devices.table.selectRows")
	var got []string
	for _, p := range act.Policies {
		got = append(got, fmt.Sprintf("%s/%s/%v/%s/%s/panicked=%v/confirm=%v", p.Layer, p.Name, p.Hooks, p.Vote, p.Reason, p.Panicked, p.RequiresConfirmation))
	}
	want := []string{
		"registry/authenticated/[discover authorize]/expose//panicked=false/confirm=false",
		"registry/tenant/[authorize]///panicked=false/confirm=false",
		"component/broken/[discover]/hide//panicked=true/confirm=false",
		"guard/require-confirmation/[invoke]///panicked=false/confirm=true",
		"capability/maintenance/[discover]/disable/Maintenance until 10:00/panicked=false/confirm=false",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("chain:\n got %q\nwant %q", got, want)
	}
	// Any hide wins over the disable, as in the snapshot.
	if act.Outcome != surface.VisibilityHidden || act.Reason != "" {
		t.Fatalf("outcome %s %q, want hidden", act.Outcome, act.Reason)
	}
	// The observation has no capability layer.
	if obs := explainedCap(t, ex, "view:devices.table.readState"); len(obs.Policies) != 4 || obs.Policies[3].Layer != surface.LayerGuard {
		t.Fatalf("observation chain: %+v", obs.Policies)
	}
}

// AS-EXPLAIN-003: for any registry, consumer and scope, the explained
// outcome of every capability is the snapshot's: hidden ones are absent,
// the others listed with the same availability and reason, and every
// capability the snapshot lists is explained. The explained view is the
// four-valued consumer view the outcome shows: it tells a policy's
// disable from the state's unavailability, as the policies' votes and
// the availability compose (DESIGN decision 19).
func TestExplainOutcomeEqualsSnapshot_AS_EXPLAIN_003(t *testing.T) {
	consumers := []surface.Consumer{{ID: "u0"}, {ID: "u1", Kind: surface.ConsumerMCPBridge}, {ID: "u2", Kind: "bogus"}}
	verdicts := []string{"expose", "disable", "hide", "panic"}
	rapid.Check(t, func(rt *rapid.T) {
		// vote is one policy's decision table, by consumer and capability name.
		vote := func(label string) surface.Policy {
			table := map[string]string{}
			for _, c := range consumers {
				for _, n := range []string{"readState", "selectRows", "devices.disable"} {
					table[c.ID+" "+n] = rapid.SampledFrom(verdicts).Draw(rt, label+" "+c.ID+" "+n)
				}
			}
			return surface.Policy{Name: label, Discover: func(pc *surface.PolicyContext) surface.Decision {
				name := pc.CapabilityID[strings.LastIndexAny(pc.CapabilityID, ".:")+1:]
				if pc.Plane == surface.PlaneDomain {
					name = strings.TrimPrefix(pc.CapabilityID, "domain:")
				}
				switch table[pc.Consumer.ID+" "+name] {
				case "disable":
					return surface.Disable("by " + label)
				case "hide":
					return surface.Hide()
				case "panic":
					panic(label)
				}
				return surface.Expose()
			}}
		}
		policies := func(label string) []surface.Policy {
			n := rapid.IntRange(0, 2).Draw(rt, label+" policies")
			out := make([]surface.Policy, n)
			for i := range out {
				out[i] = vote(fmt.Sprintf("%s%d", label, i))
			}
			return out
		}
		guard := policies("guard")
		reg := surface.New(&surface.Options{
			Environment: surface.EnvTest, Logger: quiet, Policies: policies("registry"),
			OnRegister: func(surface.Candidate) surface.Verdict { return surface.Verdict{Policies: guard} },
		})
		defer reg.Close()
		reg.SetProcedureExecutor(newDomain())
		types := []string{"a.x", "a.y", "b"}
		for i := range rapid.IntRange(1, 4).Draw(rt, "components") {
			when := rapid.Bool().Draw(rt, "when")
			c := surface.Component{
				Type: rapid.SampledFrom(types).Draw(rt, "type"), InstanceID: fmt.Sprint("i", i), Description: "C",
				Priority: rapid.IntRange(0, 1).Draw(rt, "priority"), Policies: policies("component"),
				Disabled: rapid.Bool().Draw(rt, "disabled"),
				Observations: map[string]surface.Capability{"readState": surface.Observation(surface.ObservationDef[int]{
					Description: "Reads", When: func() bool { return when }, Policies: policies("obs"),
					Read: func(context.Context, *surface.Call) (int, error) { return 1, nil }})},
				Actions: map[string]surface.Capability{"selectRows": surface.Action(surface.ActionDef[selectRows, surface.None]{
					Description: "Selects", Effect: surface.EffectLocalState, Policies: policies("act"),
					Execute: func(context.Context, *surface.Call, selectRows) (surface.None, error) { return surface.None{}, nil }})},
			}
			if rapid.Bool().Draw(rt, "procedure") {
				c.Procedures = []surface.Capability{surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{
					ID: "domain:devices.disable", Description: "Disable devices", Effect: surface.EffectServerMutation,
					Policies: policies("proc"), When: func() bool { return !when }})}
			}
			h, err := reg.Register(c)
			if err != nil {
				rt.Fatal(err)
			}
			if rapid.Bool().Draw(rt, "override") {
				h.Update(surface.Update{Availability: map[string]surface.Availability{"selectRows": {Reason: "busy"}}})
			}
		}
		for _, consumer := range consumers {
			var scope []string
			if rapid.Bool().Draw(rt, "scoped") {
				scope = rapid.SliceOfN(rapid.SampledFrom([]string{"a", "a.x", "b", "devices.disable", "zzz"}), 1, 2).Draw(rt, "scope")
			}
			opts := surface.SnapshotOptions{Consumer: consumer, Scope: scope}
			snap, ex := reg.Snapshot(opts), reg.Explain(opts)
			type state struct {
				available bool
				reason    string
			}
			listed := map[string]state{}
			for _, c := range snap.Components {
				for _, o := range c.Observations {
					listed[c.RegistrationID+" "+o.CapabilityID] = state{o.Available, o.UnavailableReason}
				}
				for _, a := range c.Actions {
					listed[c.RegistrationID+" "+a.CapabilityID] = state{a.Available, a.UnavailableReason}
				}
			}
			for _, p := range snap.Procedures {
				listed[p.RegistrationID+" "+p.ProcedureID] = state{p.Available, p.UnavailableReason}
			}
			shown := 0
			for _, c := range ex.Capabilities {
				if c.View.Outcome() != c.Outcome {
					rt.Fatalf("%s: view %s, outcome %s", c.CapabilityID, c.View, c.Outcome)
				}
				if consumer.Kind.Valid() {
					// The view is the votes' composition, then the
					// availability: any hide, else the first disable, else
					// the state.
					want, reason := surface.ViewAvailable, ""
					if !c.Available {
						want, reason = surface.ViewUnavailable, c.UnavailableReason
					}
					for _, p := range c.Policies {
						if p.Vote == "hide" {
							want, reason = surface.ViewHidden, ""
							break
						}
						if p.Vote == "disable" && want != surface.ViewDisabled {
							want, reason = surface.ViewDisabled, p.Reason
						}
					}
					if c.View != want || c.Reason != reason {
						rt.Fatalf("%s: view %s %q, the votes and availability say %s %q", c.CapabilityID, c.View, c.Reason, want, reason)
					}
				}
				got, ok := listed[c.RegistrationID+" "+c.CapabilityID]
				switch {
				case c.Outcome == surface.VisibilityHidden && ok:
					rt.Fatalf("%s explained hidden, listed %+v (consumer %s)", c.CapabilityID, got, consumer.ID)
				case c.Outcome == surface.VisibilityHidden:
				case !ok:
					rt.Fatalf("%s explained %s, not listed (consumer %s)", c.CapabilityID, c.Outcome, consumer.ID)
				case got != state{c.Outcome == surface.VisibilityExposed, c.Reason}:
					rt.Fatalf("%s explained %s %q, listed %+v (consumer %s)", c.CapabilityID, c.Outcome, c.Reason, got, consumer.ID)
				default:
					shown++
				}
			}
			if shown != len(listed) {
				rt.Fatalf("the snapshot lists %d capabilities, the explanation shows %d", len(listed), shown)
			}
		}
	})
}

// AS-EXPLAIN-004: no agent-facing entry reaches an explanation. The
// toolset, its meta tools and the adapters never refer to Explain or its
// types, and a hidden capability leaves no trace through them.
func TestExplainUnreachableFromAgent_AS_EXPLAIN_004(t *testing.T) {
	explainNames := map[string]bool{"Explain": true, "Explanation": true, "CapabilityExplanation": true, "PolicyExplanation": true, "explainChain": true}
	agentFacing := []string{"toolset.go", "meta.go", "wirename.go", "../mcpsurface/*.go", "../otelsurface/*.go"}
	fset := token.NewFileSet()
	for _, pattern := range agentFacing {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no agent-facing files match %s (%v)", pattern, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && explainNames[id.Name] {
					t.Errorf("%s: agent-facing code refers to %s", fset.Position(id.Pos()), id.Name)
				}
				return true
			})
		}
	}

	reg := surfacetest.NewRegistry(t, &surface.Options{Policies: []surface.Policy{hideFrom("secret", "agent", "selectRows")}})
	surfacetest.MustRegister(t, reg, table("main", nil))
	agent := surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
	if c := explainedCap(t, reg.Explain(surface.SnapshotOptions{Consumer: agent}), "view:devices.table.selectRows"); c.Outcome != surface.VisibilityHidden {
		t.Fatalf("the test needs a hidden capability: %+v", c)
	}
	for _, mode := range []surface.ToolsetMode{surface.ToolsetDirect, surface.ToolsetMeta} {
		ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Consumer: agent, Mode: mode, Topology: surface.TopologyRemote})
		if err != nil {
			t.Fatal(err)
		}
		// What the agent discovers: the tools in direct mode, what
		// surface_discover returns in meta mode (whose constant tool
		// descriptions name example ids).
		var seen strings.Builder
		if mode == surface.ToolsetMeta {
			res := ts.Call(bg, "surface_discover", nil, surface.CallOptions{})
			fmt.Fprintf(&seen, "%s\n", res.Output)
		} else {
			for _, tool := range ts.Tools() {
				fmt.Fprintf(&seen, "%s %s %s\n", tool.Name, tool.Description, tool.InputSchema)
			}
		}
		if strings.Contains(seen.String(), "selectRows") || strings.Contains(seen.String(), "secret") {
			t.Fatalf("%s mode shows the hidden capability:\n%s", mode, seen.String())
		}
		_ = ts.Close()
	}
	hidden := reg.Invoke(bg, surface.Invocation{CapabilityID: "view:devices.table.selectRows", Input: []byte(`{"ids":[]}`)}, surface.InvokeOptions{Consumer: agent})
	absent := reg.Invoke(bg, surface.Invocation{CapabilityID: "view:devices.table.nothing", Input: []byte(`{"ids":[]}`)}, surface.InvokeOptions{Consumer: agent})
	if hidden.Error == nil || absent.Error == nil || hidden.Error.Code != surface.CodeCapabilityNotFound ||
		hidden.Error.Message != absent.Error.Message || fmt.Sprint(hidden.Error.Details) != fmt.Sprint(absent.Error.Details) {
		t.Fatalf("a hidden capability must look absent: %+v vs %+v", hidden.Error, absent.Error)
	}
}

// An unknown consumer kind sees nothing: every capability is explained as
// hidden, with the reason, and no policy runs.
func TestExplainUnknownConsumerKind(t *testing.T) {
	ran := 0
	reg := surfacetest.NewRegistry(t, &surface.Options{Logger: quiet, Policies: []surface.Policy{{Name: "count", Discover: func(*surface.PolicyContext) surface.Decision {
		ran++
		return surface.Expose()
	}}}})
	surfacetest.MustRegister(t, reg, table("main", nil))
	ex := reg.Explain(surface.SnapshotOptions{Consumer: surface.Consumer{ID: "x", Kind: "bogus"}})
	if len(ex.Capabilities) != 2 || ran != 0 {
		t.Fatalf("explained %d capabilities, %d policy runs", len(ex.Capabilities), ran)
	}
	for _, c := range ex.Capabilities {
		if c.Outcome != surface.VisibilityHidden || !strings.Contains(c.Reason, "unknown") || c.Policies != nil {
			t.Fatalf("%+v", c)
		}
	}
}
