package surface_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// dangerous returns a component whose "wipe" action needs confirmation and
// records the evidence its handler received.
func dangerous(ran *atomic.Int64, evidence *atomic.Value) surface.Component {
	return surface.Component{Type: "devices", Description: "Devices", Actions: map[string]surface.Capability{
		"wipe": surface.Action(surface.ActionDef[echo, surface.None]{
			Description: "Wipe devices", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
			Execute: func(_ context.Context, call *surface.Call, in echo) (surface.None, error) {
				ran.Add(1)
				if evidence != nil && call.Confirmation != nil {
					evidence.Store(*call.Confirmation)
				}
				return surface.None{}, nil
			}}),
		"tidy": surface.Action(surface.ActionDef[echo, surface.None]{
			Description: "Tidy devices", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
			Execute: func(context.Context, *surface.Call, echo) (surface.None, error) {
				ran.Add(1)
				return surface.None{}, nil
			}}),
	}}
}

const wipeID = "view:devices.wipe"

func wipe(invocationID, input, confirmationID string) surface.Invocation {
	i := inv(invocationID, wipeID, input)
	i.ConfirmationID = confirmationID
	return i
}

func requireConfirmation(t *testing.T, res surface.Result) string {
	t.Helper()
	e := surfacetest.RequireCode(t, res, surface.CodeConfirmationRequired)
	id, _ := e.Details["confirmationId"].(string)
	if !strings.HasPrefix(id, "cnf_") || e.Retry != surface.RetryWithConfirmation || e.Details["origin"] != "client" || e.Details["effect"] != "local-state" {
		t.Fatalf("%+v", e)
	}
	return id
}

func invalidReason(t *testing.T, res surface.Result) string {
	t.Helper()
	e := surfacetest.RequireCode(t, res, surface.CodeConfirmationInvalid)
	reason, _ := e.Details["reason"].(string)
	return reason
}

// The whole protocol: required → approve → retry with evidence → ok, once.
// AS-IDENT-006: the retry with the same invocation id executes once.
func TestConfirmationRoundTrip_AS_IDENT_006(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	var evidence atomic.Value
	surfacetest.MustRegister(t, reg, dangerous(&ran, &evidence))
	rec := surfacetest.Record(t, reg)
	first := reg.Invoke(bg, wipe("call-1", `{"ids":["d1"]}`, ""), as("a"))
	id := requireConfirmation(t, first)
	e := first.Error
	if e.Details["summary"] != `Wipe devices — input: {"ids":["d1"]}` {
		t.Fatalf("summary %q", e.Details["summary"])
	}
	pending := reg.Confirmations().Pending()
	if len(pending) != 1 || pending[0].ConfirmationID != id || pending[0].Input != `{"ids":["d1"]}` || pending[0].ConsumerKey != "mcp-bridge:a" {
		t.Fatalf("pending %+v", pending)
	}
	if ran.Load() != 0 {
		t.Fatal("ran before approval")
	}
	if !reg.Confirmations().Resolve(id, surface.Resolution{Approved: true, Actor: "user:42"}) {
		t.Fatal("resolve failed")
	}
	if reg.Confirmations().Resolve(id, surface.Resolution{}) {
		t.Fatal("a resolved request cannot be resolved again")
	}
	ok := reg.Invoke(bg, wipe("call-1", `{"ids":["d1"]}`, id), as("a"))
	surfacetest.RequireOK(t, ok)
	if ran.Load() != 1 {
		t.Fatal("approved call did not run once")
	}
	ev, _ := evidence.Load().(surface.Evidence)
	if ev.ID != id || ev.ApprovedAt.IsZero() {
		t.Fatalf("evidence %+v", ev)
	}
	// Replaying the same retry returns the cached ok without running again.
	if again := reg.Invoke(bg, wipe("call-1", `{"ids":["d1"]}`, id), as("a")); again != ok || ran.Load() != 1 {
		t.Fatalf("replay %+v", again)
	}
	types := strings.Join(rec.Types(), ",")
	want := "invocation-started,confirmation-requested,invocation-settled,confirmation-resolved,invocation-started,invocation-settled"
	if types != want {
		t.Fatalf("events %s\nwant   %s", types, want)
	}
	b, _ := json.Marshal(rec.Events()[3])
	if string(b) != `{"type":"confirmation-resolved","confirmationId":"`+id+`","outcome":"approved"}` {
		t.Fatalf("%s", b)
	}
}

// AS-CONFIRM-001: input changed after approval → mismatch, no execution.
// AS-CONFIRM-002: the digest is canonical JSON, matched by exact value.
func TestConfirmationBinding_AS_CONFIRM_001_002(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	id := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1","d2"]}`, ""), as("a")))
	reg.Confirmations().Resolve(id, surface.Resolution{Approved: true})
	for _, changed := range []string{`{"ids":["d1","d3"]}`, `{"ids":["d2","d1"]}`, `{"ids":["d1"]}`} {
		if r := invalidReason(t, reg.Invoke(bg, wipe("", changed, id), as("a"))); r != "mismatch" {
			t.Fatalf("%s: %s", changed, r)
		}
	}
	if ran.Load() != 0 {
		t.Fatal("bait-and-switch executed")
	}
	// Key order and whitespace are irrelevant: the canonical value matches.
	surfacetest.RequireOK(t, reg.Invoke(bg, wipe("", `{ "ids" : [ "d1", "d2" ] }`, id), as("a")))
}

// AS-CONFIRM-003: evidence is single use.
func TestConfirmationSingleUse_AS_CONFIRM_003(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	id := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, ""), as("a")))
	reg.Confirmations().Resolve(id, surface.Resolution{Approved: true})
	surfacetest.RequireOK(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a")))
	if r := invalidReason(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a"))); r != "consumed" {
		t.Fatal(r)
	}
	if ran.Load() != 1 {
		t.Fatalf("ran %d", ran.Load())
	}
	// After approval, a new call without the id opens a second request.
	second := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, ""), as("a")))
	if second == id {
		t.Fatal("consumed request reused")
	}
}

// AS-CONFIRM-004: no replay across consumer, registration or capability.
func TestConfirmationNoReplay_AS_CONFIRM_004(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	h := surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	id := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, ""), as("a")))
	reg.Confirmations().Resolve(id, surface.Resolution{Approved: true})
	if r := invalidReason(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("b"))); r != "mismatch" {
		t.Fatal("other consumer:", r)
	}
	tidy := inv("", "view:devices.tidy", `{"ids":["d1"]}`)
	tidy.ConfirmationID = id
	if r := invalidReason(t, reg.Invoke(bg, tidy, as("a"))); r != "mismatch" {
		t.Fatal("other capability:", r)
	}
	// Another registry (a page reload) does not know the id.
	other := surfacetest.NewRegistry(t, nil)
	surfacetest.MustRegister(t, other, dangerous(&ran, nil))
	if r := invalidReason(t, other.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a"))); r != "mismatch" {
		t.Fatal("other registry:", r)
	}
	// Staleness beats approval: after a remount the approval cannot revive
	// the dead registration.
	h.Unregister()
	e := reg.Invoke(bg, surface.Invocation{CapabilityID: wipeID, RegistrationID: h.ID(), Input: json.RawMessage(`{"ids":["d1"]}`), ConfirmationID: id}, as("a"))
	surfacetest.RequireCode(t, e, surface.CodeComponentUnmounted)
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	if r := invalidReason(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a"))); r != "mismatch" {
		t.Fatal("other registration:", r)
	}
	if ran.Load() != 0 {
		t.Fatalf("ran %d", ran.Load())
	}
}

// AS-CONFIRM-004 between the clients of one consumer: evidence binds to
// the client that asked (InvokeOptions.Client), whatever resolved two
// clients to one consumer. Another client can neither present it,
// pending or approved (mismatch, and the approval stands), nor be handed
// it: its identical call opens a request of its own. The asking client's
// retry executes once.
func TestConfirmationBoundToClient_AS_CONFIRM_004(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	client := func(name string) surface.InvokeOptions {
		o := as("ann")
		o.Client = name
		return o
	}
	const input = `{"ids":["d1"]}`
	id := requireConfirmation(t, reg.Invoke(bg, wipe("", input, ""), client("one")))
	if r := invalidReason(t, reg.Invoke(bg, wipe("", input, id), client("two"))); r != "mismatch" {
		t.Fatal("pending, presented by another client:", r)
	}
	reg.Confirmations().Resolve(id, surface.Resolution{Approved: true})
	for _, c := range []string{"two", ""} {
		if r := invalidReason(t, reg.Invoke(bg, wipe("", input, id), client(c))); r != "mismatch" {
			t.Fatalf("approved, presented by client %q: %s", c, r)
		}
	}
	other := requireConfirmation(t, reg.Invoke(bg, wipe("", input, ""), client("two")))
	if other == id {
		t.Fatal("another client was handed the confirmation")
	}
	if p := reg.Confirmations().Pending(); len(p) != 1 || p[0].ConfirmationID != other || p[0].ConsumerKey != "mcp-bridge:ann" {
		t.Fatalf("pending %+v", p)
	}
	if ran.Load() != 0 {
		t.Fatalf("ran %d before the asking client's retry", ran.Load())
	}
	surfacetest.RequireOK(t, reg.Invoke(bg, wipe("", input, id), client("one")))
	if r := invalidReason(t, reg.Invoke(bg, wipe("", input, id), client("one"))); r != "consumed" || ran.Load() != 1 {
		t.Fatalf("%s, ran %d", r, ran.Load())
	}
}

// AS-CONFIRM-005: the pending store is bounded; overflow creates nothing.
func TestConfirmationStoreBound_AS_CONFIRM_005(t *testing.T) {
	reg := surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{MaxPendingConfirmations: 2}})
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["1"]}`, ""), as("a")))
	requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["2"]}`, ""), as("a")))
	e := surfacetest.RequireCode(t, reg.Invoke(bg, wipe("", `{"ids":["3"]}`, ""), as("a")), surface.CodeRateLimited)
	if e.Details["reason"] != "queue-full" || e.Details["retryAfterMs"] != 1000 {
		t.Fatalf("%+v", e)
	}
	if n := len(reg.Confirmations().Pending()); n != 2 {
		t.Fatalf("%d pending", n)
	}
	// RATE_LIMITED is not cached: the same id retried later works.
	id := reg.Confirmations().Pending()[0].ConfirmationID
	reg.Confirmations().Resolve(id, surface.Resolution{})
	requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["3"]}`, ""), as("a")))
}

// AS-CONFIRM-006: a pending re-request keeps the id; denial is final;
// expiry restarts the flow.
func TestConfirmationLifecycle_AS_CONFIRM_006(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(&surface.Options{Limits: surface.Limits{ConfirmationTTL: time.Minute}})
		defer reg.Close()
		var ran atomic.Int64
		surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
		rec := surfacetest.Record(t, reg)
		id := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, ""), as("a")))
		again := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, ""), as("a")))
		withID := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a")))
		if again != id || withID != id || len(reg.Confirmations().Pending()) != 1 {
			t.Fatal("a pending request must be reused")
		}
		if n := strings.Count(strings.Join(rec.Types(), ","), "confirmation-requested"); n != 1 {
			t.Fatalf("%d requested events", n)
		}

		// Denial is final and the reason stays internal.
		reg.Confirmations().Resolve(id, surface.Resolution{Reason: "not on a Friday"})
		res := reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a"))
		e := surfacetest.RequireCode(t, res, surface.CodeConfirmationInvalid)
		if e.Details["reason"] != "denied" || e.Retry != surface.RetryNo {
			t.Fatalf("%+v", e)
		}
		if b, _ := json.Marshal(res); strings.Contains(string(b), "Friday") {
			t.Fatal("the deny reason leaked")
		}

		// Expiry: the timer expires a pending request; retry says expired
		// (retry with-confirmation), and a new call starts over.
		id2 := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d2"]}`, ""), as("a")))
		outcome := make(chan surface.ConfirmationOutcome)
		go func() { outcome <- reg.Confirmations().Wait(bg, id2) }()
		time.Sleep(time.Minute)
		if o := <-outcome; o != surface.OutcomeExpired {
			t.Fatalf("wait: %s", o)
		}
		e = surfacetest.RequireCode(t, reg.Invoke(bg, wipe("", `{"ids":["d2"]}`, id2), as("a")), surface.CodeConfirmationInvalid)
		if e.Details["reason"] != "expired" || e.Retry != surface.RetryWithConfirmation {
			t.Fatalf("%+v", e)
		}
		id3 := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d2"]}`, ""), as("a")))
		if id3 == id2 {
			t.Fatal("expired request reused")
		}
		// An approval not used before the TTL lapses.
		reg.Confirmations().Resolve(id3, surface.Resolution{Approved: true})
		time.Sleep(time.Minute)
		if r := invalidReason(t, reg.Invoke(bg, wipe("", `{"ids":["d2"]}`, id3), as("a"))); r != "expired" {
			t.Fatal(r)
		}
		if ran.Load() != 0 {
			t.Fatal("ran")
		}
		if o := reg.Confirmations().Wait(bg, "cnf_unknown"); o != surface.OutcomeExpired {
			t.Fatal(o)
		}
	})
}

// Evidence is reserved, then consumed (DESIGN decision 10): a failure
// before execution gives the approval back; a concurrent retry with the
// same evidence while it is reserved fails consumed.
func TestEvidenceReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil)
		defer reg.Close()
		var ran atomic.Int64
		allow := atomic.Bool{}
		hold := make(chan struct{})
		surfacetest.MustRegister(t, reg, surface.Component{Type: "devices", Description: "Devices", Actions: map[string]surface.Capability{
			"wipe": surface.Action(surface.ActionDef[echo, surface.None]{
				Description: "Wipe devices", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				Precondition: func(context.Context, *surface.Call, echo) error {
					if !allow.Load() {
						return surface.Precondition("Devices are busy; retry shortly.", nil)
					}
					<-hold
					return nil
				},
				Execute: func(context.Context, *surface.Call, echo) (surface.None, error) {
					ran.Add(1)
					return surface.None{}, nil
				}}),
		}})
		id := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, ""), as("a")))
		reg.Confirmations().Resolve(id, surface.Resolution{Approved: true})
		surfacetest.RequireCode(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a")), surface.CodePreconditionFailed)
		allow.Store(true)
		done := make(chan surface.Result)
		go func() { done <- reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a")) }()
		synctest.Wait() // reserved, waiting in the precondition
		if r := invalidReason(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, id), as("a"))); r != "consumed" {
			t.Fatal(r)
		}
		close(hold)
		surfacetest.RequireOK(t, <-done)
		if ran.Load() != 1 {
			t.Fatalf("ran %d", ran.Load())
		}
	})
}

// RequireConfirmation escalates conditionally, with its own summary; a
// sent id is ignored when no confirmation is needed.
func TestRequireConfirmationPolicy(t *testing.T) {
	big := surface.RequireConfirmation(func(ic *surface.InvokeContext) bool {
		ids, _ := ic.Input.(map[string]any)["ids"].([]any)
		return len(ids) > 2
	}, func(input any) string {
		ids, _ := input.(map[string]any)["ids"].([]any)
		return "Select " + string(rune('0'+len(ids))) + " devices at once"
	})
	reg := surfacetest.NewRegistry(t, &surface.Options{Policies: []surface.Policy{big}})
	p := newProbe()
	surfacetest.MustRegister(t, reg, p.component("main"))
	surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{CapabilityID: selectID, Input: json.RawMessage(`{"ids":["a"]}`), ConfirmationID: "cnf_ignored"}, as("a")))
	res := reg.Invoke(bg, inv("", selectID, `{"ids":["a","b","c"]}`), as("a"))
	requireConfirmation(t, res)
	if res.Error.Details["summary"] != "Select 3 devices at once" {
		t.Fatalf("%+v", res.Error.Details)
	}
	// Observations never ask.
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", "view:devices.table.readState", ""), as("a")))
}

func TestConfirmationSubscribeAndClose(t *testing.T) {
	reg := surface.New(nil)
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	var lists [][]surface.PendingConfirmation
	reg.Confirmations().Subscribe(func(p []surface.PendingConfirmation) { lists = append(lists, p) })
	rec := surfacetest.Record(t, reg)
	id := requireConfirmation(t, reg.Invoke(bg, wipe("", `{"ids":["d1"]}`, ""), as("a")))
	b, _ := json.Marshal(reg.Confirmations().Pending()[0])
	if !strings.Contains(string(b), `"input":{"ids":["d1"]}`) || !strings.Contains(string(b), `"expiresAt":"`) {
		t.Fatalf("%s", b)
	}
	_ = reg.Close()
	if len(lists) != 2 || len(lists[0]) != 1 || len(lists[1]) != 0 {
		t.Fatalf("subscriber saw %v", lists)
	}
	if got := strings.Join(rec.Types(), ","); !strings.HasSuffix(got, "confirmation-resolved") {
		t.Fatalf("Close must expire pending confirmations with an event: %s", got)
	}
	if o := reg.Confirmations().Wait(bg, id); o != surface.OutcomeExpired {
		t.Fatal(o)
	}
}

// Every confirmation-* audit record names its confirmation; at audit
// level full (a destructive procedure) it also carries the input the
// approval binds, at metadata level (an action) it does not.
func TestConfirmationAuditRecords(t *testing.T) {
	sink := surface.NewMemorySink(0)
	reg, _ := newDomainRegistry(t, &surface.Options{Audit: sink})
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	sel := &selection{ids: []string{"d1"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectDestructive)))

	full := requireConfirmationEffect(t, reg.Invoke(bg, inv("p1", "domain:devices.disable", `{"reason":"r"}`), as("a")), surface.EffectDestructive)
	reg.Confirmations().Resolve(full, surface.Resolution{Approved: true, Actor: "alice"})
	retry := inv("p1", "domain:devices.disable", `{"reason":"r"}`)
	retry.ConfirmationID = full
	surfacetest.RequireOK(t, reg.Invoke(bg, retry, as("a")))
	meta := requireConfirmation(t, reg.Invoke(bg, wipe("w1", `{"ids":["d2"]}`, ""), as("a")))
	reg.Confirmations().Resolve(meta, surface.Resolution{Approved: false, Actor: "bob", Reason: "not on a Friday"})

	seen := map[string][]string{}
	for _, e := range sink.Events() {
		if !strings.HasPrefix(string(e.Type), "confirmation-") {
			continue
		}
		// The user's reason for a denial is kept for operators, on the
		// denial's record only (AS-CONFIRM-006: the agent never sees it).
		if wantReason := map[bool]string{true: "not on a Friday"}[e.Type == surface.AuditConfirmationDenied]; e.Reason != wantReason {
			t.Fatalf("%s reason %q, want %q", e.Type, e.Reason, wantReason)
		}
		if e.ConfirmationID != full && e.ConfirmationID != meta {
			t.Fatalf("%s names confirmation %q", e.Type, e.ConfirmationID)
		}
		seen[e.ConfirmationID] = append(seen[e.ConfirmationID], string(e.Type))
		switch {
		case e.ConfirmationID == full && (e.Payload == nil || e.Payload.Input != `{"ids":["d1"],"reason":"r"}`):
			t.Fatalf("%s of the destructive procedure without its input: %+v", e.Type, e.Payload)
		case e.ConfirmationID == meta && e.Payload != nil:
			t.Fatalf("%s at metadata level carries %+v", e.Type, e.Payload)
		}
	}
	if got := strings.Join(seen[full], ","); got != "confirmation-requested,confirmation-approved,confirmation-consumed" {
		t.Fatal(got)
	}
	if got := strings.Join(seen[meta], ","); got != "confirmation-requested,confirmation-denied" {
		t.Fatal(got)
	}
	b, _ := json.Marshal(sink.Events()[len(sink.Events())-1])
	if !strings.Contains(string(b), `"confirmationId":"`+meta+`"`) {
		t.Fatalf("%s", b)
	}
}

// The confirmation-consumed record names the invocation that spent the
// approval, so that what became of an approval can be found in the audit
// trail (its invocation-settled record); and the records of an invocation
// are given a context carrying the call's values, never cancelled.
func TestConsumedRecordNamesTheInvocationAndCallContext(t *testing.T) {
	type ctxKey struct{}
	var mu sync.Mutex
	type seen struct {
		e       surface.AuditEvent
		value   any
		done    bool
		endable bool
	}
	var got []seen
	sink := sinkFunc(func(ctx context.Context, e surface.AuditEvent) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, seen{e: e, value: ctx.Value(ctxKey{}), done: ctx.Err() != nil, endable: ctx.Done() != nil})
		return nil
	})
	reg, _ := newDomainRegistry(t, &surface.Options{Audit: sink})
	sel := &selection{ids: []string{"d1"}}
	surfacetest.MustRegister(t, reg, tableWithRef(disableRef(sel, surface.EffectDestructive)))
	id := requireConfirmationEffect(t, reg.Invoke(bg, inv("p1", "domain:devices.disable", `{"reason":"r"}`), as("a")), surface.EffectDestructive)
	if !reg.Confirmations().Resolve(id, surface.Resolution{Approved: true, Actor: "alice"}) {
		t.Fatal("not approved")
	}
	ctx, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, "the call's"))
	retry := inv("p2", "domain:devices.disable", `{"reason":"r"}`)
	retry.ConfirmationID = id
	surfacetest.RequireOK(t, reg.Invoke(ctx, retry, as("a")))
	cancel() // the records were written; cancelling the call changes nothing
	mu.Lock()
	defer mu.Unlock()
	var consumed, settled int
	for _, s := range got {
		switch {
		case s.e.Type == surface.AuditConfirmationConsumed:
			consumed++
			if s.e.InvocationID != "p2" || s.e.ConfirmationID != id || s.value != "the call's" {
				t.Errorf("consumed: invocation %q, confirmation %q, ctx value %v", s.e.InvocationID, s.e.ConfirmationID, s.value)
			}
		case s.e.Type == surface.AuditInvocationSettled && s.e.InvocationID == "p2", s.e.Type == surface.AuditInvocationStarted && s.e.InvocationID == "p2":
			settled++
			if s.value != "the call's" {
				t.Errorf("%s: ctx value %v, want the call's", s.e.Type, s.value)
			}
		}
		if s.done || s.endable {
			t.Errorf("%s: a context that is done (%v) or can end (%v)", s.e.Type, s.done, s.endable)
		}
	}
	if consumed != 1 || settled != 2 {
		t.Fatalf("consumed %d, started+settled %d of the retry", consumed, settled)
	}
}

// sinkFunc is an AuditSink that is a function.
type sinkFunc func(ctx context.Context, e surface.AuditEvent) error

func (f sinkFunc) Record(ctx context.Context, e surface.AuditEvent) error { return f(ctx, e) }
