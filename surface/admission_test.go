package surface_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// job is the input of the gate's capabilities: a tag naming the call and a
// record it is about.
type job struct {
	Tag    string `json:"tag"`
	Record string `json:"record,omitempty"`
}

// gate holds every call of its capabilities until the test releases it
// by tag, recording which calls are running.
type gate struct {
	mu      sync.Mutex
	running []string
	release map[string]chan struct{}
}

func newGate() *gate { return &gate{release: map[string]chan struct{}{}} }

func (g *gate) ch(tag string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.release[tag] == nil {
		g.release[tag] = make(chan struct{})
	}
	return g.release[tag]
}

func (g *gate) exec(ctx context.Context, in job) error {
	g.mu.Lock()
	g.running = append(g.running, in.Tag)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running = slices.DeleteFunc(g.running, func(s string) bool { return s == in.Tag })
		g.mu.Unlock()
	}()
	select {
	case <-g.ch(in.Tag):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// now returns the running tags, sorted.
func (g *gate) now() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Join(slices.Sorted(slices.Values(g.running)), ",")
}

func (g *gate) action(c surface.Concurrency[job]) surface.Capability {
	return surface.Action(surface.ActionDef[job, surface.None]{
		Description: "Waits for the test", Effect: surface.EffectLocalState, Concurrency: c,
		Execute: func(ctx context.Context, _ *surface.Call, in job) (surface.None, error) {
			return surface.None{}, g.exec(ctx, in)
		},
	})
}

// start invokes capability name of type "jobs" with tag in the
// background and waits until it runs, queues or fails; its result goes to
// results.
func start(reg *surface.Registry, name, tag, record string, results chan<- string) {
	in, _ := json.Marshal(job{Tag: tag, Record: record})
	go func() {
		res := reg.Invoke(bg, surface.Invocation{CapabilityID: "view:jobs." + name, Input: in}, as("x"))
		out := tag + ":" + string(res.Status)
		if res.Error != nil {
			out += ":" + string(res.Error.Code)
		}
		results <- out
	}()
	synctest.Wait()
}

// AS-CONC-001: each concurrency mode forms the group the spec names —
// instance (shared by the instance's actions), capability (the action's
// own), key (per key of the validated input, shared by the registration's
// key-mode actions) and parallel (up to Max at once) — each with its own
// queue depth; overflow fails queue-full without running.
func TestConcurrencyModes_AS_CONC_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := surface.New(nil) // ActionQueueDepth 2
		defer reg.Close()
		g := newGate()
		byRecord := func(in job) string { return in.Record }
		surfacetest.MustRegister(t, reg, surface.Component{Type: "jobs", Description: "Jobs", Actions: map[string]surface.Capability{
			"inst":     g.action(surface.Concurrency[job]{}),
			"inst2":    g.action(surface.Concurrency[job]{Mode: surface.ConcurrencyInstance}),
			"own":      g.action(surface.Concurrency[job]{Mode: surface.ConcurrencyCapability, QueueDepth: new(0)}),
			"par":      g.action(surface.Concurrency[job]{Mode: surface.ConcurrencyParallel, Max: 2, QueueDepth: new(1)}),
			"byKey":    g.action(surface.Concurrency[job]{Mode: surface.ConcurrencyKey, Key: byRecord}),
			"byKeyToo": g.action(surface.Concurrency[job]{Mode: surface.ConcurrencyKey, Key: byRecord, QueueDepth: new(0)}),
		}})
		results := make(chan string, 32)
		expect := func(want ...string) {
			t.Helper()
			var got []string
			for range want {
				got = append(got, <-results)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("results %v, want %v", got, want)
			}
		}
		release := func(tags ...string) {
			for _, tag := range tags {
				close(g.ch(tag))
			}
			synctest.Wait()
		}

		// Instance: inst and inst2 share one FIFO of depth 2.
		start(reg, "inst", "i1", "", results)
		start(reg, "inst2", "i2", "", results)
		start(reg, "inst", "i3", "", results)
		start(reg, "inst2", "i4", "", results)
		expect("i4:error:RATE_LIMITED")
		// Capability: its own group, depth 0; not blocked by the instance.
		start(reg, "own", "o1", "", results)
		start(reg, "own", "o2", "", results)
		expect("o2:error:RATE_LIMITED")
		// Parallel: two at once, one waiting, the next refused.
		start(reg, "par", "p1", "", results)
		start(reg, "par", "p2", "", results)
		start(reg, "par", "p3", "", results)
		start(reg, "par", "p4", "", results)
		expect("p4:error:RATE_LIMITED")
		// Key: one queue per record across both key-mode actions; the
		// first arrival fixed the group's depth (2).
		start(reg, "byKey", "k1", "r1", results)
		start(reg, "byKeyToo", "k2", "r2", results)
		start(reg, "byKeyToo", "k3", "r1", results)
		start(reg, "byKey", "k4", "r1", results)
		start(reg, "byKey", "k5", "r1", results)
		expect("k5:error:RATE_LIMITED")
		if got := g.now(); got != "i1,k1,k2,o1,p1,p2" {
			t.Fatalf("running %s", got)
		}

		release("i1", "p1", "k1")
		expect("i1:ok", "p1:ok", "k1:ok")
		if got := g.now(); got != "i2,k2,k3,o1,p2,p3" {
			t.Fatalf("after one release per group, running %s (FIFO: i2, p3, k3)", got)
		}
		release("i2", "i3", "k3", "k4", "k2", "o1", "p2", "p3")
		expect("i2:ok", "i3:ok", "k3:ok", "k4:ok", "k2:ok", "o1:ok", "p2:ok", "p3:ok")
		if got := g.now(); got != "" {
			t.Fatalf("still running %s", got)
		}
	})
}

// AS-CONC-001: procedure references queue per reference by default, not
// with the instance's actions; in instance mode they share the
// instance's queue.
func TestProcedureConcurrency_AS_CONC_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		x := surface.NewFuncExecutor()
		surface.AddFunc(x, "jobs.run", func(ctx context.Context, _ *surface.ProcedureCall, in job) (surface.None, error) {
			return surface.None{}, g.exec(ctx, in)
		})
		surface.AddFunc(x, "jobs.shared", func(ctx context.Context, _ *surface.ProcedureCall, in job) (surface.None, error) {
			return surface.None{}, g.exec(ctx, in)
		})
		reg := surface.New(&surface.Options{Limits: surface.Limits{ActionQueueDepth: -1}})
		defer reg.Close()
		reg.SetProcedureExecutor(x)
		surfacetest.MustRegister(t, reg, surface.Component{Type: "jobs", Description: "Jobs",
			Actions: map[string]surface.Capability{"inst": g.action(surface.Concurrency[job]{})},
			Procedures: []surface.Capability{
				surface.Procedure(surface.ProcedureDef[job, surface.None]{ID: "domain:jobs.run", Description: "Runs", Effect: surface.EffectServerQuery}),
				surface.Procedure(surface.ProcedureDef[job, surface.None]{ID: "domain:jobs.shared", Description: "Shares", Effect: surface.EffectServerQuery,
					Concurrency: surface.Concurrency[job]{Mode: surface.ConcurrencyInstance}}),
			}})
		results := make(chan string, 8)
		call := func(id, tag string) {
			in, _ := json.Marshal(job{Tag: tag})
			go func() {
				res := reg.Invoke(bg, surface.Invocation{CapabilityID: id, Input: in}, as("x"))
				out := tag + ":" + string(res.Status)
				if res.Error != nil {
					out += ":" + string(res.Error.Code)
				}
				results <- out
			}()
			synctest.Wait()
		}
		start(reg, "inst", "a1", "", results)
		call("domain:jobs.run", "r1")    // its own group: runs beside the action
		call("domain:jobs.run", "r2")    // depth 0: refused
		call("domain:jobs.shared", "s1") // the instance's group, busy: refused
		if got := []string{<-results, <-results}; !slices.Contains(got, "r2:error:RATE_LIMITED") || !slices.Contains(got, "s1:error:RATE_LIMITED") {
			t.Fatalf("%v", got)
		}
		if got := g.now(); got != "a1,r1" {
			t.Fatalf("running %s", got)
		}
		close(g.ch("a1"))
		close(g.ch("r1"))
		synctest.Wait()
		<-results
		<-results
	})
}

// AS-CONC-001: invalid concurrency settings are definition errors at
// Register.
func TestConcurrencyDefinitionErrors_AS_CONC_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	g := newGate()
	key := func(job) string { return "" }
	for _, c := range []struct {
		name string
		conc surface.Concurrency[job]
	}{
		{"parallel without max", surface.Concurrency[job]{Mode: surface.ConcurrencyParallel}},
		{"parallel max 0", surface.Concurrency[job]{Mode: surface.ConcurrencyParallel, Max: 0}},
		{"parallel negative max", surface.Concurrency[job]{Mode: surface.ConcurrencyParallel, Max: -1}},
		{"max outside parallel", surface.Concurrency[job]{Max: 2}},
		{"key without function", surface.Concurrency[job]{Mode: surface.ConcurrencyKey}},
		{"function outside key mode", surface.Concurrency[job]{Mode: surface.ConcurrencyCapability, Key: key}},
		{"negative depth", surface.Concurrency[job]{QueueDepth: new(-1)}},
		{"unknown mode", surface.Concurrency[job]{Mode: "serial"}},
	} {
		_, err := reg.Register(surface.Component{Type: "jobs", Description: "Jobs", Actions: map[string]surface.Capability{"run": g.action(c.conc)}})
		if de := surfacetest.RequireDefinitionError(t, err, surface.DefinitionInvalid); de.Field != "actions.run.concurrency" {
			t.Errorf("%s: field %q", c.name, de.Field)
		}
	}
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "jobs.run", func(context.Context, *surface.ProcedureCall, job) (surface.None, error) { return surface.None{}, nil })
	reg.SetProcedureExecutor(x)
	_, err := reg.Register(surface.Component{Type: "jobs", Description: "Jobs", Procedures: []surface.Capability{
		surface.Procedure(surface.ProcedureDef[job, surface.None]{ID: "domain:jobs.run", Description: "Runs", Effect: surface.EffectServerQuery,
			Concurrency: surface.Concurrency[job]{Mode: surface.ConcurrencyKey}}),
	}})
	if de := surfacetest.RequireDefinitionError(t, err, surface.DefinitionInvalid); de.Field != "procedures.0.concurrency" {
		t.Errorf("procedure: field %q", de.Field)
	}
	if reg.Version() != "0" {
		t.Fatal("an invalid definition registered")
	}
}

// A key function is user code: its panic fails the call handler-error,
// nothing runs, and the key's group is not left behind.
func TestConcurrencyKeyPanic(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran int
	surfacetest.MustRegister(t, reg, surface.Component{Type: "jobs", Description: "Jobs", Actions: map[string]surface.Capability{
		"run": surface.Action(surface.ActionDef[job, surface.None]{
			Description: "Runs", Effect: surface.EffectLocalState,
			Concurrency: surface.Concurrency[job]{Mode: surface.ConcurrencyKey, Key: func(in job) string {
				if in.Record == "bad" {
					panic("no key")
				}
				return in.Record
			}},
			Execute: func(context.Context, *surface.Call, job) (surface.None, error) { ran++; return surface.None{}, nil },
		}),
	}})
	call := func(record string) surface.Result {
		return reg.Invoke(bg, surface.Invocation{CapabilityID: "view:jobs.run", Input: json.RawMessage(`{"tag":"t","record":"` + record + `"}`)}, as("x"))
	}
	e := surfacetest.RequireCode(t, call("bad"), surface.CodeExecutionFailed)
	if e.Details["reason"] != "handler-error" || ran != 0 {
		t.Fatalf("%+v ran %d", e, ran)
	}
	surfacetest.RequireOK(t, call("good"))
	if ran != 1 {
		t.Fatal(ran)
	}
}

// A procedure's key function sees the effective input: the agent's
// fields and the live bound values.
func TestProcedureConcurrencyKeySeesBoundValues_AS_CONC_001(t *testing.T) {
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "jobs.run", func(context.Context, *surface.ProcedureCall, job) (surface.None, error) { return surface.None{}, nil })
	reg := surfacetest.NewRegistry(t, nil)
	reg.SetProcedureExecutor(x)
	var seen []job
	surfacetest.MustRegister(t, reg, surface.Component{Type: "jobs", Description: "Jobs",
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads", 1)},
		Procedures: []surface.Capability{
			surface.Procedure(surface.ProcedureDef[job, surface.None]{ID: "domain:jobs.run", Description: "Runs", Effect: surface.EffectServerQuery,
				Bound: []string{"record"},
				Bind:  func(context.Context) (map[string]any, error) { return map[string]any{"record": "open-record"}, nil },
				Concurrency: surface.Concurrency[job]{Mode: surface.ConcurrencyKey, Key: func(in job) string {
					seen = append(seen, in)
					return in.Record
				}}}),
		}})
	surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{CapabilityID: "domain:jobs.run", Input: json.RawMessage(`{"tag":"t"}`)}, as("x")))
	if len(seen) != 1 || seen[0] != (job{Tag: "t", Record: "open-record"}) {
		t.Fatalf("key saw %+v", seen)
	}
}
