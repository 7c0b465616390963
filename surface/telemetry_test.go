package surface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// observed is a Telemetry that records everything it is told.
type observed struct {
	mu       sync.Mutex
	starts   []surface.InvocationInfo
	phases   map[string][]surface.PhaseEvent // by invocation id
	settles  map[string][]surface.Settlement
	confirms []surface.ConfirmationChange
	regs     []surface.RegistrationChange
}

type obsKey struct{}

func newObserved() *observed {
	return &observed{phases: map[string][]surface.PhaseEvent{}, settles: map[string][]surface.Settlement{}}
}

// telemetry returns the hook; the context it hands on carries obsKey.
func (o *observed) telemetry() *surface.Telemetry {
	return &surface.Telemetry{
		Invocation: func(ctx context.Context, info surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
			o.mu.Lock()
			o.starts = append(o.starts, info)
			o.mu.Unlock()
			return context.WithValue(ctx, obsKey{}, info.InvocationID), &invRec{o: o, id: info.InvocationID}
		},
		Confirmation: func(c surface.ConfirmationChange) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.confirms = append(o.confirms, c)
		},
		Registrations: func(c surface.RegistrationChange) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.regs = append(o.regs, c)
		},
	}
}

type invRec struct {
	o  *observed
	id string
}

func (r *invRec) Phase(e surface.PhaseEvent) {
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	r.o.phases[r.id] = append(r.o.phases[r.id], e)
}

func (r *invRec) Settle(s surface.Settlement) {
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	r.o.settles[r.id] = append(r.o.settles[r.id], s)
}

// phaseNames returns the phases of an invocation by name.
func (o *observed) phaseNames(id string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, e := range o.phases[id] {
		out = append(out, e.Phase.String())
	}
	return out
}

func (o *observed) phase(t *testing.T, id string, ph surface.Phase) surface.PhaseEvent {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.phases[id] {
		if e.Phase == ph {
			return e
		}
	}
	t.Fatalf("invocation %s reached no %s phase: %v", id, ph, o.phases[id])
	return surface.PhaseEvent{}
}

// settlement returns the one settlement of an invocation.
func (o *observed) settlement(t *testing.T, id string) surface.Settlement {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.settles[id]); n != 1 {
		t.Fatalf("invocation %s settled %d times, want once", id, n)
	}
	return o.settles[id][0]
}

// live sums the registration changes per component type.
func (o *observed) live() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := map[string]int{}
	for _, c := range o.regs {
		n[c.ComponentType] += c.Delta
		if n[c.ComponentType] == 0 {
			delete(n, c.ComponentType)
		}
	}
	return n
}

type obsInput struct {
	IDs []string `json:"ids"`
}

// obsWidget is a component "obs.widget" with an action "set" that runs
// run (nil: return at once) and an action "wipe" that needs confirmation.
func obsWidget(instance string, run func(ctx context.Context) error) surface.Component {
	exec := func(ctx context.Context, _ *surface.Call, _ obsInput) (surface.None, error) {
		if run != nil {
			return surface.None{}, run(ctx)
		}
		return surface.None{}, nil
	}
	return surface.Component{
		Type: "obs.widget", InstanceID: instance, Description: "Observed widget",
		Actions: map[string]surface.Capability{
			"set":  surface.Action(surface.ActionDef[obsInput, surface.None]{Description: "Set", Effect: surface.EffectLocalState, Execute: exec}),
			"wipe": surface.Action(surface.ActionDef[obsInput, surface.None]{Description: "Wipe", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired, Execute: exec}),
		},
	}
}

var obsCaller = surface.InvokeOptions{Consumer: surface.Consumer{ID: "agent-7", Kind: surface.ConsumerMCPBridge}}

func obsCall(cap, regID, cid string) surface.Invocation {
	return surface.Invocation{CapabilityID: cap, RegistrationID: regID, Input: json.RawMessage(`{"ids":["d1"]}`), ConfirmationID: cid}
}

// An ok action: the hook sees the start, resolution and execution,
// and the handler runs with the context the hook returned.
func TestTelemetryOKAction(t *testing.T) {
	o := newObserved()
	reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry()})
	var seen any
	h := surfacetest.MustRegister(t, reg, obsWidget("w1", func(ctx context.Context) error {
		seen = ctx.Value(obsKey{})
		return nil
	}))
	res := reg.Invoke(context.Background(), obsCall("view:obs.widget.set", h.ID(), ""), obsCaller)
	surfacetest.RequireOK(t, res)

	if seen != res.InvocationID {
		t.Fatalf("the handler's context carries %v, want the hook's value %q", seen, res.InvocationID)
	}
	if len(o.starts) != 1 {
		t.Fatalf("starts = %+v", o.starts)
	}
	info := o.starts[0]
	want := surface.InvocationInfo{CapabilityID: "view:obs.widget.set", Plane: surface.PlaneView, InvocationID: res.InvocationID,
		RegistrationID: h.ID(), ConsumerKind: surface.ConsumerMCPBridge, ConsumerID: "agent-7", Start: info.Start}
	if info != want || info.Start.IsZero() {
		t.Fatalf("info = %+v, want %+v", info, want)
	}
	if got := o.phaseNames(res.InvocationID); !slices.Equal(got, []string{"resolved", "executing"}) {
		t.Fatalf("phases = %v", got)
	}
	r := o.phase(t, res.InvocationID, surface.PhaseResolved)
	if r.Kind != surface.KindAction || r.Effect != surface.EffectLocalState || r.RegistrationID != h.ID() || r.InstanceID != "w1" {
		t.Fatalf("resolved = %+v", r)
	}
	s := o.settlement(t, res.InvocationID)
	if s.Status != surface.StatusOK || s.Error != nil || !s.Admission || !s.Executed || s.QueueWait != 0 {
		t.Fatalf("settlement = %+v", s)
	}
}

// A policy refusal settles with its code before admission; a capability
// that does not exist settles without any phase.
func TestTelemetryRefusalAndNotFound(t *testing.T) {
	o := newObserved()
	deny := surface.Policy{Name: "deny", Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
		return surface.Fail(surface.NewError(surface.CodeNotAuthorized, "", nil))
	}}
	reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry(), Policies: []surface.Policy{deny}})
	h := surfacetest.MustRegister(t, reg, obsWidget("w1", nil))

	res := reg.Invoke(context.Background(), obsCall("view:obs.widget.set", h.ID(), ""), obsCaller)
	surfacetest.RequireCode(t, res, surface.CodeNotAuthorized)
	if got := o.phaseNames(res.InvocationID); !slices.Equal(got, []string{"resolved"}) {
		t.Fatalf("phases = %v", got)
	}
	s := o.settlement(t, res.InvocationID)
	if s.Status != surface.StatusError || s.Error == nil || s.Error.Code != surface.CodeNotAuthorized || s.Admission || s.Executed {
		t.Fatalf("settlement = %+v", s)
	}

	for _, c := range []struct {
		id    string
		plane surface.Plane
	}{{"view:obs.nothing.here", surface.PlaneView}, {"domain:nothing.here", surface.PlaneDomain}, {"not an id", ""},
		{"view:Not Valid", surface.PlaneView}, {"view:" + strings.Repeat("a", surface.MaxIDLength-len("view:")), surface.PlaneView}} {
		res := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: c.id}, obsCaller)
		surfacetest.RequireCode(t, res, surface.CodeCapabilityNotFound)
		if got := o.phaseNames(res.InvocationID); len(got) != 0 {
			t.Fatalf("%s: phases = %v", c.id, got)
		}
		if s := o.settlement(t, res.InvocationID); s.Error.Code != surface.CodeCapabilityNotFound {
			t.Fatalf("%s: settlement = %+v", c.id, s)
		}
		if info := o.starts[len(o.starts)-1]; info.Plane != c.plane || info.CapabilityID != c.id {
			t.Fatalf("%s: info = %+v", c.id, info)
		}
	}

	// An id longer than MaxIDLength is refused before the identity phase
	// ends: the hook never sees the invocation.
	before := len(o.starts)
	long := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "view:" + strings.Repeat("a", surface.MaxIDLength)}, obsCaller)
	surfacetest.RequireCode(t, long, surface.CodeCapabilityNotFound)
	if len(o.starts) != before {
		t.Fatalf("an over-long id started an observation: %+v", o.starts[before:])
	}
}

// A replay of a settled invocation id is not a new invocation; a conflict
// is one, and settles INVOCATION_CONFLICT. AS-IDENT-001, AS-IDENT-002.
func TestTelemetryReplayAndConflict(t *testing.T) {
	o := newObserved()
	reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry()})
	h := surfacetest.MustRegister(t, reg, obsWidget("w1", nil))
	inv := obsCall("view:obs.widget.set", h.ID(), "")
	inv.InvocationID = "call-1"
	surfacetest.RequireOK(t, reg.Invoke(context.Background(), inv, obsCaller))
	surfacetest.RequireOK(t, reg.Invoke(context.Background(), inv, obsCaller)) // replay
	if len(o.starts) != 1 {
		t.Fatalf("a replay started %d observations, want the first call's only", len(o.starts))
	}
	inv.Input = json.RawMessage(`{"ids":["d2"]}`)
	surfacetest.RequireCode(t, reg.Invoke(context.Background(), inv, obsCaller), surface.CodeInvocationConflict)
	if len(o.starts) != 2 {
		t.Fatalf("starts = %d, want 2", len(o.starts))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.settles["call-1"]; len(s) != 2 || s[1].Error == nil || s[1].Error.Code != surface.CodeInvocationConflict {
		t.Fatalf("settlements of call-1 = %+v", s)
	}
}

// A queued action reports its wait when admitted, and the settlement
// separates queue wait from execution time. AS-OBSV-001, AS-CONC-002.
func TestTelemetryQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newObserved()
		reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry()})
		release := make(chan struct{})
		first := true
		h := surfacetest.MustRegister(t, reg, obsWidget("w1", func(ctx context.Context) error {
			if first {
				first = false
				<-release
			}
			time.Sleep(time.Second) // virtual: the execution takes 1s
			return nil
		}))
		inv := obsCall("view:obs.widget.set", h.ID(), "")
		done := make(chan surface.Result, 1)
		go func() { done <- reg.Invoke(context.Background(), inv, obsCaller) }()
		synctest.Wait() // the first call runs and blocks
		go func() {
			time.Sleep(3 * time.Second)
			close(release)
		}()
		second := reg.Invoke(context.Background(), inv, obsCaller)
		surfacetest.RequireOK(t, second)
		surfacetest.RequireOK(t, <-done)

		if got := o.phaseNames(second.InvocationID); !slices.Equal(got, []string{"resolved", "queued", "admitted", "executing"}) {
			t.Fatalf("phases = %v", got)
		}
		// The first call released its slot after 3s of blocking and 1s of work.
		if a := o.phase(t, second.InvocationID, surface.PhaseAdmitted); a.QueueWait != 4*time.Second {
			t.Fatalf("admitted after %v, want 4s", a.QueueWait)
		}
		s := o.settlement(t, second.InvocationID)
		if !s.Admission || s.QueueWait != 4*time.Second || !s.Executed || s.Execution != time.Second || s.Duration != 5*time.Second {
			t.Fatalf("settlement = %+v", s)
		}
	})
}

// A timed-out action settles TIMEOUT after executing. AS-CONC-011.
func TestTelemetryTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newObserved()
		reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry()})
		h := surfacetest.MustRegister(t, reg, obsWidget("w1", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}))
		res := reg.Invoke(context.Background(), obsCall("view:obs.widget.set", h.ID(), ""), surface.InvokeOptions{Timeout: 2 * time.Second})
		surfacetest.RequireCode(t, res, surface.CodeTimeout)
		s := o.settlement(t, res.InvocationID)
		if !s.Executed || s.Execution != 2*time.Second || s.Duration != 2*time.Second || s.Error.Code != surface.CodeTimeout {
			t.Fatalf("settlement = %+v", s)
		}
	})
}

// The confirmation round trip: the request, the user's decision 30s later
// and the retry presenting the evidence, with the times the wait is
// measured from. AS-CONFIRM-003, AS-CONFIRM-006.
func TestTelemetryConfirmationRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newObserved()
		reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry()})
		h := surfacetest.MustRegister(t, reg, obsWidget("w1", nil))
		const wipe = "view:obs.widget.wipe"

		first := reg.Invoke(context.Background(), obsCall(wipe, h.ID(), ""), obsCaller)
		e := surfacetest.RequireCode(t, first, surface.CodeConfirmationRequired)
		cid := e.Details["confirmationId"].(string)
		req := o.phase(t, first.InvocationID, surface.PhaseConfirmationRequested)
		if req.ConfirmationID != cid || req.RequestedAt.IsZero() || req.ExpiresAt.Sub(req.RequestedAt) != reg.Limits().ConfirmationTTL {
			t.Fatalf("requested = %+v", req)
		}
		if got := o.phaseNames(first.InvocationID); !slices.Equal(got, []string{"resolved", "confirmation-requested"}) {
			t.Fatalf("phases = %v", got)
		}

		// Presented while still pending: checked, then requested again.
		early := reg.Invoke(context.Background(), obsCall(wipe, h.ID(), cid), obsCaller)
		surfacetest.RequireCode(t, early, surface.CodeConfirmationRequired)
		if got := o.phaseNames(early.InvocationID); !slices.Equal(got, []string{"resolved", "confirmation-presented", "confirmation-requested"}) {
			t.Fatalf("phases = %v", got)
		}
		if p := o.phase(t, early.InvocationID, surface.PhaseConfirmationPresented); p.ConfirmationID != cid || !p.ApprovedAt.IsZero() || !p.RequestedAt.Equal(req.RequestedAt) {
			t.Fatalf("presented while pending = %+v", p)
		}

		time.Sleep(30 * time.Second) // the user thinks
		if !reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true}) {
			t.Fatal("resolve failed")
		}
		retry := reg.Invoke(context.Background(), obsCall(wipe, h.ID(), cid), obsCaller)
		surfacetest.RequireOK(t, retry)
		if o.starts[len(o.starts)-1].ConfirmationID != cid {
			t.Fatalf("info = %+v", o.starts[len(o.starts)-1])
		}
		if got := o.phaseNames(retry.InvocationID); !slices.Equal(got, []string{"resolved", "confirmation-presented", "executing"}) {
			t.Fatalf("phases = %v", got)
		}
		p := o.phase(t, retry.InvocationID, surface.PhaseConfirmationPresented)
		if p.ConfirmationID != cid || p.ApprovedAt.Sub(p.RequestedAt) != 30*time.Second {
			t.Fatalf("presented = %+v, want approved 30s after the request", p)
		}

		// Spent evidence is checked and refused.
		again := reg.Invoke(context.Background(), obsCall(wipe, h.ID(), cid), obsCaller)
		surfacetest.RequireCode(t, again, surface.CodeConfirmationInvalid)
		if p := o.phase(t, again.InvocationID, surface.PhaseConfirmationPresented); !p.ApprovedAt.IsZero() || !p.RequestedAt.IsZero() {
			t.Fatalf("presented spent evidence = %+v", p)
		}

		o.mu.Lock()
		confirms := slices.Clone(o.confirms)
		o.mu.Unlock()
		if len(confirms) != 2 {
			t.Fatalf("confirmation changes = %+v", confirms)
		}
		if c := confirms[0]; c.ConfirmationID != cid || c.CapabilityID != wipe || c.Outcome != "" || !c.At.Equal(c.RequestedAt) {
			t.Fatalf("request = %+v", c)
		}
		if c := confirms[1]; c.Outcome != surface.OutcomeApproved || c.At.Sub(c.RequestedAt) != 30*time.Second {
			t.Fatalf("decision = %+v", c)
		}
	})
}

// Denials and expiries (also by Close) are reported once each.
func TestTelemetryConfirmationOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newObserved()
		reg := surface.New(&surface.Options{Telemetry: o.telemetry()})
		h := surfacetest.MustRegister(t, reg, obsWidget("w1", nil))
		ids := make([]string, 3)
		for i := range ids {
			inv := obsCall("view:obs.widget.wipe", h.ID(), "")
			inv.Input = json.RawMessage(`{"ids":["d` + string(rune('0'+i)) + `"]}`)
			e := surfacetest.RequireCode(t, reg.Invoke(context.Background(), inv, obsCaller), surface.CodeConfirmationRequired)
			ids[i] = e.Details["confirmationId"].(string)
		}
		reg.Confirmations().Resolve(ids[0], surface.Resolution{})
		time.Sleep(reg.Limits().ConfirmationTTL - time.Second)
		reg.Confirmations().Expire(ids[1])
		if err := reg.Close(); err != nil {
			t.Fatal(err)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		got := map[string][]surface.ConfirmationOutcome{}
		for _, c := range o.confirms {
			got[c.ConfirmationID] = append(got[c.ConfirmationID], c.Outcome)
		}
		want := map[string][]surface.ConfirmationOutcome{ids[0]: {"", surface.OutcomeDenied}, ids[1]: {"", surface.OutcomeExpired}, ids[2]: {"", surface.OutcomeExpired}}
		for id, w := range want {
			if !slices.Equal(got[id], w) {
				t.Fatalf("%s: %v, want %v", id, got[id], w)
			}
		}
	})
}

// Registration counts follow Register, Replace, Unregister,
// RegisterContext and Close, and end at zero.
func TestTelemetryRegistrations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newObserved()
		reg := surface.New(&surface.Options{Telemetry: o.telemetry(), OnDuplicate: surface.DuplicateReplace})
		surfacetest.MustRegister(t, reg, obsWidget("w1", nil))
		h2 := surfacetest.MustRegister(t, reg, obsWidget("w2", nil))
		surfacetest.MustRegister(t, reg, obsWidget("w1", nil)) // replaces w1
		surfacetest.MustRegister(t, reg, simple("obs.other", "a"))
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := reg.RegisterContext(ctx, simple("obs.other", "b")); err != nil {
			t.Fatal(err)
		}
		if got := o.live(); got["obs.widget"] != 2 || got["obs.other"] != 2 {
			t.Fatalf("live = %v", got)
		}
		h2.Unregister()
		h2.Unregister() // twice: nothing more
		cancel()
		synctest.Wait() // the context's unregistration runs
		if got := o.live(); got["obs.widget"] != 1 || got["obs.other"] != 1 {
			t.Fatalf("live = %v", got)
		}
		if err := reg.Close(); err != nil {
			t.Fatal(err)
		}
		if got := o.live(); len(got) != 0 {
			t.Fatalf("after Close live = %v, want none", got)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if n := len(o.regs); n != 10 { // 5 registered, 1 replaced, 1 unregistered, 1 by ctx, 2 types closed
			t.Fatalf("%d changes: %+v", n, o.regs)
		}
	})
}

// A panicking Telemetry hook is recovered and logged; calls and registrations
// go on as without it. AS-EVT-001.
func TestTelemetryPanics(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	boom := func() { panic("boom") }
	for _, name := range []string{"Invocation", "Phase", "Settle", "Confirmation", "Registrations"} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			logs.Reset()
			mu.Unlock()
			o := newObserved()
			obs := o.telemetry()
			inner := obs.Invocation
			switch name {
			case "Invocation":
				obs.Invocation = func(context.Context, surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
					boom()
					return nil, nil
				}
			case "Phase", "Settle":
				obs.Invocation = func(ctx context.Context, info surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
					c, rec := inner(ctx, info)
					return c, panicking{InvocationRecorder: rec, in: name}
				}
			case "Confirmation":
				obs.Confirmation = func(surface.ConfirmationChange) { boom() }
			case "Registrations":
				obs.Registrations = func(surface.RegistrationChange) { boom() }
			}
			reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: obs, Logger: log})
			h := surfacetest.MustRegister(t, reg, obsWidget("w1", nil))
			surfacetest.RequireOK(t, reg.Invoke(context.Background(), obsCall("view:obs.widget.set", h.ID(), ""), obsCaller))
			e := surfacetest.RequireCode(t, reg.Invoke(context.Background(), obsCall("view:obs.widget.wipe", h.ID(), ""), obsCaller), surface.CodeConfirmationRequired)
			if !reg.Confirmations().Resolve(e.Details["confirmationId"].(string), surface.Resolution{Approved: true}) {
				t.Fatal("resolve failed")
			}
			mu.Lock()
			out := logs.String()
			mu.Unlock()
			if !strings.Contains(out, "telemetry hook panicked") || !strings.Contains(out, "hook="+name) {
				t.Fatalf("log = %q", out)
			}
		})
	}
}

type panicking struct {
	surface.InvocationRecorder
	in string
}

func (p panicking) Phase(e surface.PhaseEvent) {
	if p.in == "Phase" {
		panic("boom")
	}
	p.InvocationRecorder.Phase(e)
}

func (p panicking) Settle(s surface.Settlement) {
	if p.in == "Settle" {
		panic("boom")
	}
	p.InvocationRecorder.Settle(s)
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// A Telemetry without hooks is none; New copies the Telemetry, so
// changing it later changes nothing.
func TestTelemetryCopied(t *testing.T) {
	o := newObserved()
	obs := o.telemetry()
	reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: obs})
	obs.Invocation = nil
	h := surfacetest.MustRegister(t, reg, obsWidget("w1", nil))
	res := reg.Invoke(context.Background(), obsCall("view:obs.widget.set", h.ID(), ""), obsCaller)
	surfacetest.RequireOK(t, res)
	o.settlement(t, res.InvocationID)

	empty := surfacetest.NewRegistry(t, &surface.Options{Telemetry: &surface.Telemetry{}})
	h = surfacetest.MustRegister(t, empty, obsWidget("w1", nil))
	surfacetest.RequireOK(t, empty.Invoke(context.Background(), obsCall("view:obs.widget.set", h.ID(), ""), obsCaller))
}

// With IsolateHandlers the handler runs on a goroutine of its own, still
// with the context the hook returned, and the phases and settlement
// are reported as inline.
func TestTelemetryIsolatedHandlers(t *testing.T) {
	o := newObserved()
	reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry(), IsolateHandlers: true})
	seen := make(chan any, 1)
	h := surfacetest.MustRegister(t, reg, obsWidget("w1", func(ctx context.Context) error {
		seen <- ctx.Value(obsKey{})
		return nil
	}))
	res := reg.Invoke(context.Background(), obsCall("view:obs.widget.set", h.ID(), ""), obsCaller)
	surfacetest.RequireOK(t, res)
	if v := <-seen; v != res.InvocationID {
		t.Fatalf("the isolated handler's context carries %v, want %q", v, res.InvocationID)
	}
	if got := o.phaseNames(res.InvocationID); !slices.Equal(got, []string{"resolved", "executing"}) {
		t.Fatalf("phases = %v", got)
	}
	if s := o.settlement(t, res.InvocationID); !s.Executed || s.Status != surface.StatusOK {
		t.Fatalf("settlement = %+v", s)
	}
}

// A settlement says whether the id the call named is of a registered
// capability (live, or remembered by a tombstone), so that telemetry keys
// series only by ids the application registered, whatever a caller sends.
func TestTelemetrySettlementRegistered(t *testing.T) {
	o := newObserved()
	hide := surface.Policy{Name: "hide", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Hide() }}
	reg := surfacetest.NewRegistry(t, &surface.Options{Telemetry: o.telemetry()})
	gone := surfacetest.MustRegister(t, reg, obsWidget("w1", nil))
	gone.Unregister()
	hidden := obsWidget("w2", nil)
	hidden.Type, hidden.Policies = "obs.hidden", []surface.Policy{hide}
	surfacetest.MustRegister(t, reg, hidden)
	live := surfacetest.MustRegister(t, reg, obsWidget("w3", nil))
	for _, c := range []struct {
		in         surface.Invocation
		code       surface.Code
		registered bool
	}{
		{obsCall("view:obs.widget.set", live.ID(), ""), "", true},
		{obsCall("view:obs.widget.set", gone.ID(), ""), surface.CodeStaleCapability, true},
		{obsCall("view:obs.hidden.set", "", ""), surface.CodeCapabilityNotFound, true}, // registered, hidden from this consumer
		{obsCall("view:obs.widget.madeUp", gone.ID(), ""), surface.CodeComponentUnmounted, false},
		{obsCall("view:obs.widget.madeUp", "", ""), surface.CodeCapabilityNotFound, false},
		{obsCall("domain:made.up", live.ID(), ""), surface.CodeCapabilityNotFound, false},
	} {
		res := reg.Invoke(context.Background(), c.in, obsCaller)
		if c.code == "" {
			surfacetest.RequireOK(t, res)
		} else {
			surfacetest.RequireCode(t, res, c.code)
		}
		if s := o.settlement(t, res.InvocationID); s.Registered != c.registered {
			t.Errorf("%s with %s: registered %v, want %v", c.in.CapabilityID, c.in.RegistrationID, s.Registered, c.registered)
		}
	}
}
