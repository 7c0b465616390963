package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// Golden files: one per wire shape an agent (or a host UI) reads, compared
// byte for byte so that a change of the wire format shows in review. Run
// the tests with -update to rewrite them.

// mintedID matches the ids a registry mints at random; goldens show them
// as kind#n, numbered by first appearance.
var mintedID = regexp.MustCompile(`\b(srf|reg|cnf|inv|gnt)_[0-9A-Za-z]+`)

// requireGolden compares the indented JSON of v, minted ids masked, with
// testdata/name.
func requireGolden(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	count := map[string]int{}
	got := mintedID.ReplaceAllStringFunc(string(b), func(id string) string {
		if m, ok := seen[id]; ok {
			return m
		}
		kind := id[:3]
		count[kind]++
		seen[id] = fmt.Sprintf("%s#%d", kind, count[kind])
		return seen[id]
	}) + "\n"
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from %s (run with -update to accept):\n%s", name, path, got)
	}
}

// goldenClock is the registries' clock in golden tests.
var goldenClock = func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 123_000_000, time.UTC) }

// AS-ADAPTER-002, AS-ERR-001: the envelope of every error code, with each
// reason its details can carry, exactly as an agent receives it.
func TestErrorEnvelopesGolden_AS_ERR_001(t *testing.T) {
	type kase struct {
		Case   string         `json:"case"`
		Result surface.Result `json:"result"`
	}
	var cases []kase
	add := func(name string, res surface.Result) {
		t.Helper()
		if res.Error == nil {
			t.Fatalf("%s: ok, want an error", name)
		}
		cases = append(cases, kase{name, res})
	}
	denyAll := func(code surface.Code, details map[string]any) surface.Policy {
		return surface.Policy{Name: "deny", Authorize: func(context.Context, *surface.PolicyContext, surface.Next) surface.Result {
			return surface.Fail(surface.NewError(code, "", details))
		}}
	}
	reg, _ := newDomainRegistry(t, &surface.Options{Now: goldenClock, OnDuplicate: surface.DuplicateReplace,
		Limits: surface.Limits{MaxPendingConfirmations: 3, MaxOutputBytes: 64}})
	sel := &selection{ids: []string{"d1"}}
	call := func(id, capID, input string) surface.Result {
		return reg.Invoke(bg, inv(id, capID, input), as("agent"))
	}
	var owner *surface.Handle
	action := func(effect surface.Effect, exec func(ctx context.Context, in echo) (any, error)) surface.Capability {
		return surface.Action(surface.ActionDef[echo, any]{
			Description: "Acts", Effect: effect, OutputSchema: json.RawMessage(`{"type":"object"}`),
			Execute: func(ctx context.Context, _ *surface.Call, in echo) (any, error) { return exec(ctx, in) },
		})
	}
	ok := func(context.Context, echo) (any, error) { return map[string]any{}, nil }
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.table", InstanceID: "main", Description: "Devices table",
		Actions: map[string]surface.Capability{
			"selectRows": action(surface.EffectLocalState, ok),
			"closed": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Unavailable", Effect: surface.EffectLocalState,
				When: func() bool { return false }, UnavailableReason: "The drawer is closed",
				Execute: func(context.Context, *surface.Call, echo) (surface.None, error) { return surface.None{}, nil }}),
			"checked": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Checks", Effect: surface.EffectLocalState,
				Precondition: func(context.Context, *surface.Call, echo) error {
					return surface.Precondition("Select at least one device.", map[string]any{"selected": 0})
				},
				Execute: func(context.Context, *surface.Call, echo) (surface.None, error) { return surface.None{}, nil }}),
			"slow": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Hangs", Effect: surface.EffectLocalState, Timeout: time.Millisecond,
				Execute: func(ctx context.Context, _ *surface.Call, _ echo) (surface.None, error) {
					<-ctx.Done()
					return surface.None{}, ctx.Err()
				}}),
			"failing": action(surface.EffectLocalState, func(context.Context, echo) (any, error) { return nil, errors.New("disk on fire") }),
			"badOut":  action(surface.EffectLocalState, func(context.Context, echo) (any, error) { return []int{1}, nil }),
			"bigOut":  action(surface.EffectLocalState, func(context.Context, echo) (any, error) { return map[string]any{"x": string(make([]byte, 100))}, nil }),
			"wipe": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Wipes", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				Execute: func(context.Context, *surface.Call, echo) (surface.None, error) { return surface.None{}, nil }}),
		},
		Procedures: []surface.Capability{disableRef(sel, surface.EffectDestructive)}})
	for _, i := range []string{"a", "b"} {
		surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.drawer", InstanceID: i, Description: "Drawer " + i,
			Actions: map[string]surface.Capability{"close": action(surface.EffectNavigation, ok)}})
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "guarded", Description: "Guarded", Actions: map[string]surface.Capability{
		"anonymous": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Needs a user", Effect: surface.EffectLocalState,
			Policies: []surface.Policy{denyAll(surface.CodeNotAuthenticated, nil)},
			Execute:  func(context.Context, *surface.Call, echo) (surface.None, error) { return surface.None{}, nil }}),
		"forbidden": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Needs a role", Effect: surface.EffectLocalState,
			Policies: []surface.Policy{denyAll(surface.CodeNotAuthorized, map[string]any{"origin": "client"})},
			Execute:  func(context.Context, *surface.Call, echo) (surface.None, error) { return surface.None{}, nil }}),
		"limited": surface.Action(surface.ActionDef[echo, surface.None]{Description: "Once a minute", Effect: surface.EffectLocalState,
			Policies: []surface.Policy{surface.RateLimit(1, time.Minute)},
			Execute:  func(context.Context, *surface.Call, echo) (surface.None, error) { return surface.None{}, nil }}),
	}})
	unmounting := surface.Component{Type: "devices.detail", InstanceID: "d1", Description: "Detail",
		Actions: map[string]surface.Capability{"unmounts": action(surface.EffectLocalState, func(context.Context, echo) (any, error) {
			owner.Unregister()
			return map[string]any{}, nil
		})}}
	owner = surfacetest.MustRegister(t, reg, unmounting)

	add("CAPABILITY_NOT_FOUND", call("c1", "view:devices.table.nothing", `{}`))
	add("CAPABILITY_NOT_AVAILABLE", call("c2", "view:devices.table.closed", `{"ids":[]}`))
	add("AMBIGUOUS_INSTANCE", call("c3", "view:devices.drawer.close", `{"ids":[]}`))
	add("COMPONENT_UNMOUNTED mid-flight", call("c4", "view:devices.detail.unmounts", `{"ids":[]}`))
	stale := inv("c5", "view:devices.detail.unmounts", `{"ids":[]}`)
	stale.RegistrationID = owner.ID()
	add("COMPONENT_UNMOUNTED resolve", reg.Invoke(bg, stale, as("agent")))
	old := surfacetest.MustRegister(t, reg, unmounting)
	surfacetest.MustRegister(t, reg, unmounting) // replaces old
	stale = inv("c6", "view:devices.detail.unmounts", `{"ids":[]}`)
	stale.RegistrationID = old.ID()
	add("STALE_CAPABILITY registration-replaced", reg.Invoke(bg, stale, as("agent")))
	stale.InvocationID, stale.RegistrationID = "c7", "reg_0000unknwn"
	add("STALE_CAPABILITY surface-reloaded", reg.Invoke(bg, stale, as("agent")))
	versioned := inv("c8", "domain:devices.disable", `{"reason":"r"}`)
	versioned.SurfaceVersion = "1"
	add("STALE_CAPABILITY surface-version-mismatch", reg.Invoke(bg, versioned, as("agent")))
	call("c9", "view:devices.table.selectRows", `{"ids":["d1"]}`)
	add("INVOCATION_CONFLICT", call("c9", "view:devices.table.selectRows", `{"ids":["d2"]}`))
	add("INVALID_INPUT issues", call("c10", "view:devices.table.selectRows", `{"ids":[1,"d2"],"extra":true}`))
	add("INVALID_INPUT lockedFields", call("c11", "domain:devices.disable", `{"reason":"r","ids":["victim"]}`))
	add("NOT_AUTHENTICATED", call("c12", "view:guarded.anonymous", `{"ids":[]}`))
	add("NOT_AUTHORIZED client", call("c13", "view:guarded.forbidden", `{"ids":[]}`))
	add("PRECONDITION_FAILED", call("c14", "view:devices.table.checked", `{"ids":[]}`))
	sel.mu.Lock()
	sel.fail = true
	sel.mu.Unlock()
	add("PRECONDITION_FAILED binding-failed", call("c15", "domain:devices.disable", `{"reason":"r"}`))
	sel.mu.Lock()
	sel.fail = false
	sel.mu.Unlock()
	required := call("c16", "domain:devices.disable", `{"reason":"r"}`)
	add("CONFIRMATION_REQUIRED", required)
	cnf, _ := required.Error.Details["confirmationId"].(string)
	evidence := func(id, input, confirmationID string) surface.Result {
		i := inv(id, "view:devices.table.wipe", input)
		i.ConfirmationID = confirmationID
		return reg.Invoke(bg, i, as("agent"))
	}
	add("CONFIRMATION_INVALID mismatch", evidence("c17", `{"ids":["d1"]}`, cnf))
	denied, _ := evidence("c18", `{"ids":["d2"]}`, "").Error.Details["confirmationId"].(string)
	reg.Confirmations().Resolve(denied, surface.Resolution{Approved: false})
	add("CONFIRMATION_INVALID denied", evidence("c19", `{"ids":["d2"]}`, denied))
	expired, _ := evidence("c20", `{"ids":["d3"]}`, "").Error.Details["confirmationId"].(string)
	reg.Confirmations().Expire(expired)
	add("CONFIRMATION_INVALID expired", evidence("c21", `{"ids":["d3"]}`, expired))
	approved, _ := evidence("c22", `{"ids":["d4"]}`, "").Error.Details["confirmationId"].(string)
	reg.Confirmations().Resolve(approved, surface.Resolution{Approved: true})
	surfacetest.RequireOK(t, evidence("c23", `{"ids":["d4"]}`, approved))
	add("CONFIRMATION_INVALID consumed", evidence("c24", `{"ids":["d4"]}`, approved))
	evidence("c25", `{"ids":["d5"]}`, "")
	evidence("c26", `{"ids":["d6"]}`, "")
	add("RATE_LIMITED queue-full", evidence("c27", `{"ids":["d7"]}`, "")) // three pending: the store is full
	call("c28", "view:guarded.limited", `{"ids":[]}`)
	add("RATE_LIMITED rate", call("c29", "view:guarded.limited", `{"ids":[]}`))
	add("TIMEOUT", call("c30", "view:devices.table.slow", `{"ids":[]}`))
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	add("CANCELLED", reg.Invoke(cancelled, inv("c31", "view:devices.table.selectRows", `{"ids":[]}`), as("agent")))
	add("EXECUTION_FAILED handler-error", call("c32", "view:devices.table.failing", `{"ids":[]}`))
	add("EXECUTION_FAILED output-invalid", call("c33", "view:devices.table.badOut", `{"ids":[]}`))
	add("EXECUTION_FAILED output-too-large", call("c34", "view:devices.table.bigOut", `{"ids":[]}`))
	reg2, d2 := newDomainRegistry(t, &surface.Options{Now: goldenClock})
	surfacetest.MustRegister(t, reg2, tableWithRef(disableRef(sel, surface.EffectServerQuery)))
	d2.fail = errors.New("pq: connection refused")
	add("EXECUTION_FAILED transport", reg2.Invoke(bg, inv("c35", "domain:devices.disable", `{"reason":"r"}`), as("agent")))
	d2.fail = surface.Transient(errors.New("503"))
	add("EXECUTION_FAILED transport transient", reg2.Invoke(bg, inv("c36", "domain:devices.disable", `{"reason":"r"}`), as("agent")))
	d2.fail = surface.NewError(surface.CodeNotAuthorized, "", map[string]any{"origin": "server"})
	add("NOT_AUTHORIZED server", reg2.Invoke(bg, inv("c37", "domain:devices.disable", `{"reason":"r"}`), as("agent")))
	reg2.Close()
	add("CANCELLED closed", reg2.Invoke(bg, inv("c38", "domain:devices.disable", `{"reason":"r"}`), as("agent")))

	codes := map[surface.Code]bool{}
	for _, c := range cases {
		codes[c.Result.Error.Code] = true
	}
	if len(codes) != 16 {
		t.Fatalf("%d of the 16 codes covered", len(codes))
	}
	requireGolden(t, "errors.json", cases)
}

// The pending confirmation a host UI shows the user.
func TestPendingConfirmationGolden(t *testing.T) {
	reg, _ := newDomainRegistry(t, &surface.Options{Now: goldenClock})
	sel := &selection{ids: []string{"d1", "d2"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectDestructive)))
	requireConfirmationEffect(t, reg.Invoke(bg, inv("call-1", "domain:devices.disable", `{"reason":"firmware recall"}`), as("agent")), surface.EffectDestructive)
	requireGolden(t, "pending-confirmation.json", reg.Confirmations().Pending()[0])
}

// AS-META-001, AS-META-006: the meta discover payload, through the public
// toolset: the snapshot under the requested scope narrowed by the
// configured floor, refused prefixes reported.
func TestMetaDiscoverGolden_AS_META_006(t *testing.T) {
	reg, _ := newDomainRegistry(t, &surface.Options{Now: goldenClock})
	sel := &selection{ids: []string{"d1"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectDestructive)))
	surfacetest.MustRegister(t, reg, surface.Component{Type: "settings", Description: "Settings",
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads the settings", map[string]int{"pageSize": 25})}})
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Mode: surface.ToolsetMeta, Topology: surface.TopologyRemote, Consumer: surfacetest.Consumer(),
		Scope: []string{"devices"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	res := ts.Call(bg, surface.MetaDiscover, json.RawMessage(`{"scope":["devices.table","users"]}`), surface.CallOptions{ToolCallID: "call-1"})
	surfacetest.RequireOK(t, res)
	requireGolden(t, "meta-discover.json", res)
}
