package surface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

func auditTypes(s *surface.MemorySink) string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, string(e.Type))
	}
	return strings.Join(out, ",")
}

func TestAuditLevels(t *testing.T) {
	sink := surface.NewMemorySink(0)
	reg := surfacetest.NewRegistry(t, &surface.Options{Audit: sink, Redact: func(capID string, p surface.AuditPayload) surface.AuditPayload {
		p.Input = surface.JSONText(strings.ReplaceAll(string(p.Input), "hunter2", "[redacted]"))
		return p
	}})
	mk := func(level surface.AuditLevel) surface.Capability {
		return surface.Action(surface.ActionDef[map[string]any, map[string]any]{Description: "Acts", Effect: surface.EffectLocalState, Audit: level,
			Execute: func(_ context.Context, _ *surface.Call, in map[string]any) (map[string]any, error) {
				return map[string]any{"echo": in["password"]}, nil
			}})
	}
	h := surfacetest.MustRegister(t, reg, surface.Component{Type: "form", Description: "Form", Actions: map[string]surface.Capability{
		"quiet": mk(surface.AuditLevelNone), "meta": mk(""), "full": mk(surface.AuditLevelFull),
	}, Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads", 1)}})
	if auditTypes(sink) != "registration" || sink.Events()[0].RegistrationID != h.ID() {
		t.Fatalf("%s", auditTypes(sink))
	}
	for _, name := range []string{"quiet", "read"} {
		surfacetest.RequireOK(t, surfacetest.Invoke(t, reg, "view:form."+name, map[string]any{}))
	}
	if auditTypes(sink) != "registration" {
		t.Fatalf("level none and observations record no invocation: %s", auditTypes(sink))
	}
	surfacetest.RequireOK(t, surfacetest.Invoke(t, reg, "view:form.meta", map[string]any{"password": "hunter2"}))
	ev := sink.Events()
	if auditTypes(sink) != "registration,invocation-started,invocation-settled" || ev[2].Payload != nil || ev[2].Status != surface.StatusOK {
		t.Fatalf("metadata: %s %+v", auditTypes(sink), ev[2])
	}
	surfacetest.RequireOK(t, surfacetest.Invoke(t, reg, "view:form.full", map[string]any{"password": "hunter2"}))
	last := sink.Events()[len(sink.Events())-1]
	if last.Payload == nil || last.Payload.Input != `{"password":"[redacted]"}` || last.Payload.Output != `{"echo":"hunter2"}` {
		t.Fatalf("full payload: %+v", last.Payload)
	}
	// A phase-2 failure records a settled event at metadata level.
	surfacetest.RequireCode(t, surfacetest.Invoke(t, reg, "view:form.nope", nil), surface.CodeCapabilityNotFound)
	last = sink.Events()[len(sink.Events())-1]
	if last.Type != surface.AuditInvocationSettled || last.Code != surface.CodeCapabilityNotFound || last.RegistrationID != "" {
		t.Fatalf("%+v", last)
	}
	h.Unregister()
	if last := sink.Events()[len(sink.Events())-1]; last.Type != surface.AuditUnregistration {
		t.Fatalf("%+v", last)
	}
	b, _ := json.Marshal(last)
	if !strings.Contains(string(b), `"at":"`) || !strings.Contains(string(b), `"code":"CAPABILITY_NOT_FOUND"`) {
		t.Fatalf("%s", b)
	}
}

func TestAuditPolicyAndPayloadCap(t *testing.T) {
	own := surface.NewMemorySink(0)
	reg := surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{MaxOutputBytes: 40}})
	c := newProbe().component("main")
	c.Policies = []surface.Policy{surface.Audit(own, surface.AuditLevelFull)}
	surfacetest.MustRegister(t, reg, c)
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", selectID, `{"ids":["a"]}`), as("a")))
	ev := own.Events()
	if len(ev) != 2 || ev[0].Type != surface.AuditInvocationStarted || ev[0].Payload.Input != `{"ids":["a"]}` || ev[1].Payload.Output != `{"ids":["a"]}` || ev[1].ConsumerID != "mcp-bridge:a" {
		t.Fatalf("%+v", ev)
	}
	// Too large for the output cap and for the payload cap alike.
	surfacetest.RequireCode(t, reg.Invoke(bg, inv("", selectID, `{"ids":["a very long device identifier indeed"]}`), as("a")), surface.CodeExecutionFailed)
	ev = own.Events()
	if p := ev[2].Payload; p == nil || p.Input != "" || !p.Truncated {
		t.Fatalf("oversized payload must be dropped and marked: %+v", p)
	}
}

// A panicking sink cannot break invocations; a slow one wrapped in an
// AsyncSink cannot stall them, and drops are counted, not silent.
func TestAuditSinkFailures(t *testing.T) {
	reg := surfacetest.NewRegistry(t, &surface.Options{Audit: panicSink{}})
	surfacetest.MustRegister(t, reg, newProbe().component("main"))
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("", selectID, `{"ids":[]}`), as("a")))

	synctest.Test(t, func(t *testing.T) {
		slow := &slowSink{delay: time.Hour}
		async := surface.NewAsyncSink(slow, 2)
		reg := surface.New(&surface.Options{Audit: async})
		surfacetest.MustRegister(t, reg, newProbe().component("main"))
		start := time.Now()
		for range 5 {
			surfacetest.RequireOK(t, reg.Invoke(bg, inv("", selectID, `{"ids":[]}`), as("a")))
		}
		if time.Since(start) != 0 {
			t.Fatal("a slow sink stalled invocations")
		}
		if async.Dropped() == 0 {
			t.Fatal("overflow must be counted")
		}
		_ = reg.Close()
		_ = async.Close()
		if slow.count() == 0 {
			t.Fatal("buffered records must be delivered on Close")
		}
	})
}

type panicSink struct{}

func (panicSink) Record(context.Context, surface.AuditEvent) error { panic("sink bug") }

type slowSink struct {
	mu    sync.Mutex
	delay time.Duration
	n     int
}

func (s *slowSink) Record(context.Context, surface.AuditEvent) error {
	time.Sleep(s.delay)
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	return nil
}

func (s *slowSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func TestSlogSink(t *testing.T) {
	var buf bytes.Buffer
	sink := surface.NewSlogSink(slog.New(slog.NewJSONHandler(&buf, nil)))
	reg := surfacetest.NewRegistry(t, &surface.Options{Audit: sink})
	surfacetest.MustRegister(t, reg, newProbe().component("main"))
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("call-9", selectID, `{"ids":[]}`), as("a")))
	out := buf.String()
	for _, want := range []string{`"msg":"audit"`, `"type":"registration"`, `"type":"invocation-settled"`, `"invocationId":"call-9"`, `"consumerId":"mcp-bridge:a"`, `"durationMs":`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}

// AS-OBSV-002: in development the audit trail also goes to the
// diagnostic stream (stderr), never to stdout.
func TestDevConsoleAudit_AS_OBSV_002(t *testing.T) {
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outW, errW
	reg := surface.New(&surface.Options{Environment: surface.EnvDevelopment})
	os.Stdout, os.Stderr = stdout, stderr
	surfacetest.MustRegister(t, reg, newProbe().component("main"))
	_ = reg.Close()
	outW.Close()
	errW.Close()
	gotOut, _ := io.ReadAll(outR)
	gotErr, _ := io.ReadAll(errR)
	if len(gotOut) != 0 {
		t.Fatalf("audit written to stdout: %s", gotOut)
	}
	if !strings.Contains(string(gotErr), "type=registration") {
		t.Fatalf("no audit on stderr: %q", gotErr)
	}
	// Production and test stay quiet.
	quiet := surface.New(nil)
	defer quiet.Close()
}

// A zero MemorySink is ready to use and keeps the default 1000 records,
// dropping the oldest.
func TestMemorySinkZeroValue(t *testing.T) {
	var sink surface.MemorySink
	for i := range 1002 {
		_ = sink.Record(bg, surface.AuditEvent{Type: surface.AuditRegistration, RegistrationID: strconv.Itoa(i)})
	}
	got := sink.Events()
	if len(got) != 1000 || got[0].RegistrationID != "2" || got[999].RegistrationID != "1001" {
		t.Fatalf("kept %d records, from %q to %q; want 1000 from 2 to 1001", len(got), got[0].RegistrationID, got[len(got)-1].RegistrationID)
	}
}

// Concurrent Records all land, each writer's records stay in its order,
// and a full ring keeps exactly the most recent ones: of each writer, an
// unbroken run ending with its last record.
func TestMemorySinkConcurrent(t *testing.T) {
	for _, capacity := range []int{50, 1000, 5000} {
		sink := surface.NewMemorySink(capacity)
		const writers, each = 8, 400
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					_ = sink.Record(bg, surface.AuditEvent{Type: surface.AuditInvocationSettled, ConsumerID: strconv.Itoa(w), InvocationID: strconv.Itoa(i)})
				}
			})
		}
		wg.Wait()
		got := sink.Events()
		if want := min(capacity, writers*each); len(got) != want {
			t.Fatalf("capacity %d: %d records kept, want %d", capacity, len(got), want)
		}
		runs := map[string][]int{}
		for _, e := range got {
			i, _ := strconv.Atoi(e.InvocationID)
			runs[e.ConsumerID] = append(runs[e.ConsumerID], i)
		}
		for w, seq := range runs {
			for k := range seq {
				if seq[k] != each-len(seq)+k {
					t.Fatalf("capacity %d: writer %s kept %v, not an unbroken run ending at %d", capacity, w, seq, each-1)
				}
			}
		}
	}
}

// A MemorySink keeps durations by value: what a record pointed into may
// change or be reused after Record returns, and what Events returns is the
// caller's own.
func TestMemorySinkKeepsDurationsByValue(t *testing.T) {
	var sink surface.MemorySink
	d, q, x := int64(7), int64(3), int64(4)
	_ = sink.Record(bg, surface.AuditEvent{Type: surface.AuditInvocationSettled, DurationMs: &d, QueueWaitMs: &q})
	_ = sink.Record(bg, surface.AuditEvent{Type: surface.AuditInvocationSettled, ExecutionMs: &x})
	d, q, x = 70, 30, 40
	got := sink.Events()
	if len(got) != 2 {
		t.Fatalf("kept %d records, want 2", len(got))
	}
	first, second := got[0], got[1]
	if first.DurationMs == nil || *first.DurationMs != 7 || first.QueueWaitMs == nil || *first.QueueWaitMs != 3 || first.ExecutionMs != nil {
		t.Fatalf("first record durations = %v %v %v, want 7 3 nil", first.DurationMs, first.QueueWaitMs, first.ExecutionMs)
	}
	if second.ExecutionMs == nil || *second.ExecutionMs != 4 || second.DurationMs != nil || second.QueueWaitMs != nil {
		t.Fatalf("second record durations = %v %v %v, want nil nil 4", second.DurationMs, second.QueueWaitMs, second.ExecutionMs)
	}
	*first.DurationMs = 99
	if again := sink.Events(); *again[0].DurationMs != 7 {
		t.Fatalf("changing a returned record changed the sink: %d", *again[0].DurationMs)
	}
}

// Records made one after another keep that order in Events, whichever
// goroutines (and so processors and lanes) made them: goroutines pass a
// baton, each recording the next number while holding it. The newest
// capacity records are kept.
func TestMemorySinkOrderAcrossGoroutines(t *testing.T) {
	const writers, total, capacity = 4, 3000, 500
	sink := surface.NewMemorySink(capacity)
	baton := make([]chan int, writers)
	for i := range baton {
		baton[i] = make(chan int)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range baton[w] {
				if n == total {
					for _, c := range baton {
						if c != baton[w] {
							close(c)
						}
					}
					return
				}
				_ = sink.Record(bg, surface.AuditEvent{Type: surface.AuditInvocationSettled, InvocationID: strconv.Itoa(n)})
				baton[(n+1)%writers] <- n + 1
			}
		})
	}
	baton[0] <- 0
	wg.Wait()
	got := sink.Events()
	if len(got) != capacity {
		t.Fatalf("kept %d records, want %d", len(got), capacity)
	}
	for i, e := range got {
		if want := strconv.Itoa(total - capacity + i); e.InvocationID != want {
			t.Fatalf("record %d is %s, want %s (records out of order or not the newest)", i, e.InvocationID, want)
		}
	}
}

// keepingSink keeps records as given, duration pointers included.
type keepingSink struct {
	mu     sync.Mutex
	events []surface.AuditEvent
}

func (s *keepingSink) Record(_ context.Context, e surface.AuditEvent) error {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	return nil
}

// AS-OBSV-001: a sink of the host's that keeps the records it is given,
// pointers and all, still reads each invocation's own durations after
// later invocations ran (the runtime reuses its own storage only for the
// sinks it knows copy).
func TestKeepingSinkDurationsStayOwn_AS_OBSV_001(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &keepingSink{}
		reg := surface.New(&surface.Options{Audit: sink})
		defer reg.Close()
		act := surface.Action(surface.ActionDef[struct {
			Ms int `json:"ms"`
		}, surface.None]{
			Description: "Sleeps", Effect: surface.EffectLocalState,
			Execute: func(_ context.Context, _ *surface.Call, in struct {
				Ms int `json:"ms"`
			}) (surface.None, error) {
				time.Sleep(time.Duration(in.Ms) * time.Millisecond)
				return surface.None{}, nil
			}})
		surfacetest.MustRegister(t, reg, surface.Component{Type: "sleeper", Description: "Sleeps", Actions: map[string]surface.Capability{"sleep": act}})
		for _, ms := range []int{5, 9, 13} {
			surfacetest.RequireOK(t, reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "view:sleeper.sleep", Input: json.RawMessage(`{"ms":` + strconv.Itoa(ms) + `}`)}, surface.InvokeOptions{}))
		}
		var got []int64
		for _, e := range sink.events {
			if e.Type == surface.AuditInvocationSettled {
				got = append(got, *e.ExecutionMs, *e.DurationMs)
			}
		}
		if want := []int64{5, 5, 9, 9, 13, 13}; !slices.Equal(got, want) {
			t.Fatalf("execution and total ms per invocation = %v, want %v", got, want)
		}
	})
}

// AS-OBSV-001: a MemorySink gives back every field of every record as it
// was recorded — queue wait and execution time apart, the registry's
// records and any other (a confirmation id, an actor, a payload, a type,
// status or code of the caller's own, durations of months or negative) —
// and the time with its location.
func TestMemorySinkKeepsEveryField_AS_OBSV_001(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("X", 3600))
	records := []surface.AuditEvent{
		{At: at, Type: surface.AuditInvocationSettled, CapabilityID: "view:t.a", RegistrationID: "reg_0001abcdef",
			InvocationID: "inv_1", ConsumerID: "agent:a", Status: surface.StatusOK, DurationMs: ms(12), QueueWaitMs: ms(3), ExecutionMs: ms(9)},
		{At: at, Type: surface.AuditInvocationSettled, CapabilityID: "view:t.a", InvocationID: "inv_2", ConsumerID: "agent:a",
			Status: surface.StatusError, Code: surface.CodeStaleCapability, DurationMs: ms(0)},
		{At: time.Now(), Type: surface.AuditInvocationStarted, CapabilityID: "view:t.a", RegistrationID: "reg_0001abcdef", InvocationID: "inv_3", ConsumerID: "test:t"},
		{At: at, Type: surface.AuditConfirmationApproved, CapabilityID: "view:t.b", ConfirmationID: "cnf_1", ConsumerID: "agent:a", Actor: "alice"},
		{At: at, Type: surface.AuditConfirmationDenied, CapabilityID: "view:t.b", ConsumerID: "agent:a", Reason: "not now"},
		{At: at, Type: surface.AuditInvocationSettled, CapabilityID: "view:t.b", Status: surface.StatusOK, DurationMs: ms(1),
			Payload: &surface.AuditPayload{Input: `{"a":1}`, Output: `{}`, Truncated: true}},
		{At: at, Type: "custom-type", Status: "partial", Code: "CUSTOM_CODE"},
		{At: at, Type: surface.AuditInvocationSettled, DurationMs: ms(90 * 24 * 3600 * 1000), QueueWaitMs: ms(-5), ExecutionMs: ms(1 << 40)},
		{Type: surface.AuditRegistrationRejected},
	}
	sink := surface.NewMemorySink(len(records))
	for _, e := range records {
		_ = sink.Record(bg, e)
	}
	got := sink.Events()
	if len(got) != len(records) {
		t.Fatalf("kept %d records, want %d", len(got), len(records))
	}
	deref := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	for i, want := range records {
		g := got[i]
		if g.At != want.At || g.At.Location() != want.At.Location() {
			t.Errorf("record %d: at %v, want %v", i, g.At, want.At)
		}
		for k, pair := range [3][2]*int64{{g.DurationMs, want.DurationMs}, {g.QueueWaitMs, want.QueueWaitMs}, {g.ExecutionMs, want.ExecutionMs}} {
			if deref(pair[0]) != deref(pair[1]) || pair[0] != nil && pair[0] == pair[1] {
				t.Errorf("record %d: duration %d = %v, want %v of its own", i, k, deref(pair[0]), deref(pair[1]))
			}
		}
		if (g.Payload == nil) != (want.Payload == nil) || g.Payload != nil && *g.Payload != *want.Payload {
			t.Errorf("record %d: payload %+v, want %+v", i, g.Payload, want.Payload)
		}
		g.At, g.DurationMs, g.QueueWaitMs, g.ExecutionMs, g.Payload = want.At, want.DurationMs, want.QueueWaitMs, want.ExecutionMs, want.Payload
		if g != want {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, g, want)
		}
	}
}
