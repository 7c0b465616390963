package console

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

var update = flag.Bool("update", false, "rewrite testdata/contract.json")

// consumers are the console's consumers, one of each kind it serves: the
// page's embedded agent, MCP clients and an agent in the browser.
var consumers = []surface.Consumer{ConsoleConsumer, MCPConsumer, WebMCPConsumer}

// contractFile is the console's committed contract.
const contractFile = "contract.json"

// shownSession returns a new session of a fresh console in the state its
// contract describes: the page open (the table mounted) and the detail
// panel of device d1 open, as the app gets there.
func shownSession(tb testing.TB) *Session {
	tb.Helper()
	s, err := newTestApp(tb).NewSession(SessionOptions{KeepShown: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	if err := s.openDevice(context.Background(), "d1"); err != nil {
		tb.Fatal(err)
	}
	return s
}

// mountedSession returns a session in the same state, mounted by hand:
// the table (changed by editTable, if set) and the panel registered in
// the given order.
func mountedSession(tb testing.TB, panelFirst bool, editTable func(s *Session, c *surface.Component)) *Session {
	tb.Helper()
	s, err := newTestApp(tb).NewSession(SessionOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	d, err := s.app.store.Get(context.Background(), s.User(), "d1")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	s.mount.Lock()
	defer s.mount.Unlock()
	s.mountCtx = ctx
	s.mu.Lock()
	s.view.detail = d.ID
	s.mu.Unlock()
	table, panel := s.tableComponent(), s.detailComponent(d)
	if editTable != nil {
		editTable(s, &table)
	}
	if panelFirst {
		s.detail = s.register(ctx, panel)
		s.table = s.register(ctx, table)
	} else {
		s.table = s.register(ctx, table)
		s.detail = s.register(ctx, panel)
	}
	return s
}

// The console's contract, per consumer kind, is committed in
// testdata/contract.json; a change to what any of its agents may do
// fails here until the file is updated (go test -run TestContract
// -update) and the change reviewed.
func TestContract(t *testing.T) {
	surfacetest.RequireContract(t, contractFile, shownSession(t).Registry(), &surfacetest.ContractOptions{Consumers: consumers})
}

// The contract depends only on what the console declares: not on the
// run, the machine (the file is committed), the database, the order the
// views register in, Go's map order, GOMAXPROCS, registration ids,
// versions, or live state (the selection, which flips availability, and
// the contextual notes).
func TestContractDeterministic(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", contractFile))
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for i := range 6 {
		runtime.GOMAXPROCS(1 + i%2)
		var s *Session
		switch i % 3 {
		case 0:
			s = shownSession(t)
		case 1:
			s = mountedSession(t, true, nil)
		case 2:
			s = mountedSession(t, false, nil)
			// Another panel comes and goes (new registration ids, a higher
			// version), and rows are selected.
			ctx := context.Background()
			for _, id := range []string{"d2", "d1"} {
				if err := s.openDevice(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			s.selectRows([]string{"d3", "d4"}, "")
		}
		c, err := contract.FromRegistry(s.Registry(), consumers...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			changes, _ := contract.Compare(must(contract.Parse(want)), c)
			var b strings.Builder
			_ = contract.WriteTable(&b, changes)
			t.Fatalf("build %d differs from the committed contract:\n%s", i, b.String())
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The positions of the references in the table's Procedures
// (tableComponent lists disable, enable, list).
const (
	disableRef = 0
	enableRef  = 1
)

// refWith returns the table's reference to the procedure id (disable or
// enable) with its confirmation level set to level: the reference
// domain.DisableRef or EnableRef builds, with the same description, the
// same agent-visible schema, the same binding and the same grant
// ceiling.
func refWith[In, Out any](tb testing.TB, s *Session, id string, effect surface.Effect, level surface.Confirmation) surface.Capability {
	tb.Helper()
	var shown contract.Capability
	for _, c := range must(contract.FromRegistry(shownSession(tb).Registry(), MCPConsumer)).Consumers[0].Capabilities {
		if c.CapabilityID == id {
			shown = c
		}
	}
	// The full schema: the agent's, plus the bound ids.
	var full map[string]any
	if err := json.Unmarshal(shown.InputSchema, &full); err != nil {
		tb.Fatal(err)
	}
	full["properties"].(map[string]any)["ids"] = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	full["required"] = append(full["required"].([]any), "ids")
	schemaText, _ := json.Marshal(full)
	var grants surface.GrantRule
	if id == domain.DisableID {
		grants = DisableGrants
	}
	return surface.Procedure(surface.ProcedureDef[In, Out]{
		ID: id, Description: shown.Description, InputSchema: schemaText,
		Effect: effect, Confirmation: level, Grants: grants,
		Bound: []string{"ids"}, Bind: s.bindSelection, Describe: s.describeSelection,
		When: s.hasSelection, UnavailableReason: domain.NothingSelected,
	})
}

// recordingTB records a helper's failures instead of failing the test;
// Fatalf ends the helper's goroutine, as it does for a test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	fatals []string
	logs   []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recordingTB) Logf(format string, args ...any) {
	r.mu.Lock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// check runs RequireContract on reg against the committed contract with
// a recording test, and returns its failure ("" if it passed).
func check(t *testing.T, reg *surface.Registry, fail contract.Classes) string {
	t.Helper()
	r := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		surfacetest.RequireContract(r, contractFile, reg, &surfacetest.ContractOptions{Consumers: consumers, Fail: fail})
	}()
	<-done
	if len(r.fatals) > 1 {
		t.Fatalf("%d failures: %q", len(r.fatals), r.fatals)
	}
	if len(r.fatals) == 0 {
		return ""
	}
	return r.fatals[0]
}

// Lowering disable's confirmation fails the contract check as a
// widening, for every consumer; raising enable's passes a check that
// fails on widening only, and still fails the exact one.
func TestLoweringDisableConfirmationIsWidening(t *testing.T) {
	if *update {
		t.Skip("-update rewrites the contract; this test checks changes against it")
	}
	widening := contract.Classes{contract.Widening}
	committed := must(contract.Parse(must(os.ReadFile(filepath.Join("testdata", contractFile)))))

	// The declared level lowered to optional (the component's
	// RequireConfirmation policy still applies to disable; the contract
	// cannot see its condition, so the declaration's own lowering is what
	// it reports).
	s := mountedSession(t, false, func(s *Session, c *surface.Component) {
		c.Procedures[disableRef] = refWith[domain.DisableInput, domain.DisableOutput](t, s, domain.DisableID, surface.EffectDestructive, surface.ConfirmOptional)
	})
	changes := must(contract.Compare(committed, must(contract.FromRegistry(s.Registry(), consumers...))))
	if len(changes) != 2*len(consumers) {
		t.Fatalf("%d changes, want 2 per consumer:\n%s", len(changes), tableOf(changes))
	}
	for _, c := range changes {
		want := map[string]contract.Class{"confirmation": contract.Widening, "requiresConfirmation": contract.Neutral}[c.Field]
		if c.Capability != "domain:devices.disable @ devices.table/main" || want == "" || c.Class != want {
			t.Fatalf("unexpected change %+v", c)
		}
	}
	for _, fail := range []contract.Classes{nil, widening} {
		msg := check(t, s.Registry(), fail)
		for _, want := range []string{"testdata/contract.json changed", "widening", "domain:devices.disable", "confirmation", `"required" → "optional"`,
			"embedded:console", "mcp-bridge:agent", "webmcp:browser"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("the failure (fail %v) does not say %q:\n%s", fail, want, msg)
			}
		}
	}

	// Lowered all the way: the declaration to optional and the
	// component's RequireConfirmation policy gone.
	s = mountedSession(t, false, func(s *Session, c *surface.Component) {
		c.Procedures[disableRef] = refWith[domain.DisableInput, domain.DisableOutput](t, s, domain.DisableID, surface.EffectDestructive, surface.ConfirmOptional)
		c.Policies = nil
	})
	changes = must(contract.Compare(committed, must(contract.FromRegistry(s.Registry(), consumers...))))
	byPolicy := 0
	for _, c := range changes {
		// (Nothing asks any more, so nothing is grantable: a narrowing.)
		if c.Class != contract.Widening && c.Field != "requiresConfirmation" && c.Field != "standingGrants" {
			t.Fatalf("not a widening: %+v", c)
		}
		if c.Field == "confirmationByPolicy" && strings.HasPrefix(c.Capability, domain.DisableID) {
			byPolicy++
		}
	}
	if byPolicy != len(consumers) {
		t.Fatalf("confirmationByPolicy widened for %d consumers:\n%s", byPolicy, tableOf(changes))
	}
	if msg := check(t, s.Registry(), widening); !strings.Contains(msg, "confirmationByPolicy") || !strings.Contains(msg, "policies[component require-confirmation]") {
		t.Fatalf("the failure does not name the policy:\n%s", msg)
	}

	// The converse, a raise (enable now requires confirmation), is a
	// narrowing: the widening gate passes, the exact check does not.
	s = mountedSession(t, false, func(s *Session, c *surface.Component) {
		c.Procedures[enableRef] = refWith[domain.EnableInput, domain.EnableOutput](t, s, domain.EnableID, surface.EffectServerMutation, surface.ConfirmRequired)
	})
	if msg := check(t, s.Registry(), widening); msg != "" {
		t.Fatalf("a narrowing failed the widening gate:\n%s", msg)
	}
	if msg := check(t, s.Registry(), nil); !strings.Contains(msg, "narrowing") || strings.Contains(msg, "widening  ") {
		t.Fatalf("the exact check: %s", msg)
	}
	// And the contract as the app builds it passes both.
	if msg := check(t, shownSession(t).Registry(), nil); msg != "" {
		t.Fatal(msg)
	}
}

func tableOf(changes []contract.Change) string {
	var b strings.Builder
	_ = contract.WriteTable(&b, changes)
	return b.String()
}

// Disable's grant ceiling is part of the contract: a longer TTL or more
// uses fails the check as a widening, for every consumer; no grants at
// all is a narrowing.
func TestWideningDisableGrantsIsWidening(t *testing.T) {
	if *update {
		t.Skip("-update rewrites the contract; this test checks changes against it")
	}
	widening := contract.Classes{contract.Widening}
	ref := func(rule surface.GrantRule) func(s *Session, c *surface.Component) {
		return func(s *Session, c *surface.Component) {
			c.Procedures[disableRef] = domain.DisableRefWithGrants(s.bindSelection, s.describeSelection, rule)
		}
	}
	for _, rule := range []surface.GrantRule{
		{Allow: true, MaxTTL: time.Hour, MaxUses: DisableGrants.MaxUses},
		{Allow: true, MaxTTL: DisableGrants.MaxTTL, MaxUses: 100},
	} {
		s := mountedSession(t, false, ref(rule))
		msg := check(t, s.Registry(), widening)
		for _, want := range []string{"widening", "domain:devices.disable", "standingGrants", "embedded:console", "mcp-bridge:agent", "webmcp:browser"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("%+v: the failure does not say %q:\n%s", rule, want, msg)
			}
		}
	}
	if msg := check(t, mountedSession(t, false, ref(surface.GrantRule{})).Registry(), widening); msg != "" {
		t.Fatalf("no grants at all failed the widening gate:\n%s", msg)
	}
	if msg := check(t, mountedSession(t, false, ref(DisableGrants)).Registry(), nil); msg != "" {
		t.Fatalf("the console's own ceiling: %s", msg)
	}
}
