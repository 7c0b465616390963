// Package surfacetest provides helpers for testing code that uses package
// surface, in the spirit of net/http/httptest. It is the Go form of the
// testing harness of the runtime semantics (§17).
//
// # The harness
//
// New returns a Surface: a registry (its own, or one given) with a test
// consumer, {id: "test", kind: "test"}. It invokes as an agent would,
// attaching the registration id it would have discovered; reads
// observations and checks they leave the surface alone; captures
// references to replay later as a stale agent; switches the host context
// (As); approves, denies and expires confirmation requests; and records
// every event and audit record:
//
//	s := surfacetest.New(t, nil)
//	s.Register(myComponent)
//	surfacetest.RequireExposed(t, s, "view:devices.table.selectRows", "")
//	surfacetest.RequireOK(t, s.Invoke("view:devices.table.selectRows", in, surfacetest.InvokeOptions{}))
//	state := surfacetest.ObserveAs[TableState](s, "view:devices.table.readState", "")
//
// # Matchers
//
// RequireExposed, RequireExposedUnavailable, RequireOK and RequireFailWith
// (and RequireCode, RequireDefinitionError) fail the test unless a
// snapshot or a result is as expected. Failure messages tell a hidden
// capability from an unavailable one.
//
// # Semantic snapshots
//
// SemanticSnapshot writes a snapshot in a normalized, deterministic JSON
// form for golden files: no surface id or capture time, registration ids
// as <reg#N>. RequireGolden compares output with a file under testdata
// and rewrites it when the test binary runs with -update;
// RequireSnapshotGolden does both for a snapshot.
//
// # Contract golden files
//
// RequireContract takes the contract of a registry (package contract:
// what each named consumer may observe and do) and compares it
// with a golden file under testdata, written with -update as for
// RequireGolden; a difference fails the test with the changes classified
// as widening, narrowing or neutral. ContractOptions say for which
// consumers the contract is taken and which classes fail:
// contract.Classes{contract.Widening} fails only when a change lets a
// consumer do more, and logs the rest. RequireContractFunc does the same
// for an application that builds a registry per consumer:
//
//	surfacetest.RequireContract(t, "shop.contract.json", reg,
//		&surfacetest.ContractOptions{Consumers: []surface.Consumer{agent, console}})
//
// # Conformance kits
//
// TestAuditSink and TestPolicy check code an application writes against
// the contracts of package surface, as testing/slogtest checks a
// slog.Handler. TestAuditSink drives an AuditSink through the hooks
// AuditSinkUnderTest gives it (what arrived, flush, the loss count, a
// stalled destination): records delivered once and intact, Record safe
// from many goroutines, never blocking, untouched by cancellation, an
// error meaning a counted loss. TestPolicy runs a Policy under
// PolicyScenarios: discovery pure and fast, authorization blind to the
// input, invoke hooks seeing only the validated effective input and
// leaving it as it is. Both fail a blocked call at a generous bound,
// never wait for time to pass, and run every built-in of the module in
// its own tests.
//
// # Smaller helpers
//
// NewRegistry, MustRegister, Record, Invoke and the capability builders
// Value and Noop serve tests that drive a registry directly.
//
// Helpers take a testing.TB, call its Helper method, register cleanups
// with it, and fail the test on misuse.
package surfacetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// NewRegistry returns a registry for the test, in the Test environment
// unless opts says otherwise, closed when the test ends.
func NewRegistry(tb testing.TB, opts *surface.Options) *surface.Registry {
	tb.Helper()
	var o surface.Options
	if opts != nil {
		o = *opts
	}
	if o.Environment == "" {
		o.Environment = surface.EnvTest
	}
	reg := surface.New(&o)
	tb.Cleanup(func() { _ = reg.Close() })
	return reg
}

// Consumer returns the test consumer, {id: "test", kind: "test"}.
func Consumer() surface.Consumer {
	return surface.Consumer{ID: "test", Kind: surface.ConsumerTest}
}

// MustRegister registers c and fails the test unless it went live.
func MustRegister(tb testing.TB, reg *surface.Registry, c surface.Component) *surface.Handle {
	tb.Helper()
	h, err := reg.Register(c)
	if err != nil {
		tb.Fatalf("Register(%s/%s): %v", c.Type, c.InstanceID, err)
	}
	if st := h.Status(); st != surface.HandleActive {
		tb.Fatalf("Register(%s/%s): handle is %v, want active", c.Type, c.InstanceID, st)
	}
	return h
}

// RequireDefinitionError fails the test unless err is a
// *surface.DefinitionError with the given code, and returns it.
func RequireDefinitionError(tb testing.TB, err error, code surface.DefinitionCode) *surface.DefinitionError {
	tb.Helper()
	var de *surface.DefinitionError
	if !errors.As(err, &de) {
		tb.Fatalf("got error %v, want a *surface.DefinitionError %s", err, code)
	}
	if de.Code != code {
		tb.Fatalf("got %s (%v), want %s", de.Code, de, code)
	}
	return de
}

// Value returns an observation that always reads v.
func Value[T any](description string, v T) surface.Capability {
	return surface.Observation(surface.ObservationDef[T]{
		Description: description,
		Read:        func(context.Context, *surface.Call) (T, error) { return v, nil },
	})
}

// Noop returns an action taking and returning nothing, with the given
// effect.
func Noop(description string, effect surface.Effect) surface.Capability {
	return surface.Action(surface.ActionDef[surface.None, surface.None]{
		Description: description,
		Effect:      effect,
		Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
			return surface.None{}, nil
		},
	})
}

// Recorder records the events of a registry. It is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []surface.Event
}

// Record subscribes a new Recorder to reg until the test ends.
func Record(tb testing.TB, reg *surface.Registry) *Recorder {
	rec := &Recorder{}
	tb.Cleanup(reg.Subscribe(rec.add))
	return rec
}

// add records e.
func (r *Recorder) add(e surface.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []surface.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Types returns the wire types of the events recorded so far.
func (r *Recorder) Types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	types := make([]string, len(r.events))
	for i, e := range r.events {
		types[i] = e.EventType()
	}
	return types
}

// Reset forgets the recorded events.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = nil
	r.mu.Unlock()
}

// Invoke calls a capability as the test consumer with input marshalled to
// JSON (nil for none). When the capability has exactly one live instance
// its registration id is attached, as an adapter would after discovery.
func Invoke(tb testing.TB, reg *surface.Registry, capabilityID string, input any) surface.Result {
	tb.Helper()
	inv := surface.Invocation{CapabilityID: capabilityID}
	if input != nil {
		raw, err := json.Marshal(input)
		if err != nil {
			tb.Fatalf("Invoke(%s): marshal input: %v", capabilityID, err)
		}
		inv.Input = raw
	}
	inv.RegistrationID = UniqueRegistration(reg, capabilityID)
	return reg.Invoke(context.Background(), inv, surface.InvokeOptions{Consumer: Consumer()})
}

// UniqueRegistration returns the registration id of the only live
// component offering capabilityID, or "" if there is none or several.
func UniqueRegistration(reg *surface.Registry, capabilityID string) string {
	found := ""
	for _, c := range reg.Snapshot(surface.SnapshotOptions{Consumer: Consumer()}).Components {
		has := false
		for _, o := range c.Observations {
			has = has || o.CapabilityID == capabilityID
		}
		for _, a := range c.Actions {
			has = has || a.CapabilityID == capabilityID
		}
		if has {
			if found != "" {
				return ""
			}
			found = c.RegistrationID
		}
	}
	return found
}

// RequireOK fails the test unless res is ok.
func RequireOK(tb testing.TB, res surface.Result) {
	tb.Helper()
	if res.Status != surface.StatusOK || res.Error != nil {
		b, _ := json.Marshal(res)
		tb.Fatalf("result is not ok: %s", b)
	}
}

// RequireCode fails the test unless res failed with code, and returns the
// error.
func RequireCode(tb testing.TB, res surface.Result, code surface.Code) *surface.Error {
	tb.Helper()
	if res.Status != surface.StatusError || res.Error == nil || res.Error.Code != code {
		b, _ := json.Marshal(res)
		tb.Fatalf("want error %s, got %s", code, b)
	}
	return res.Error
}
