package surfacetest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// AuditSinkUnderTest is a sink for [TestAuditSink], with the hooks
// through which the kit observes what the sink did with its records.
type AuditSinkUnderTest struct {
	// Sink is the sink under test. Required.
	Sink surface.AuditSink
	// Records returns the records that have reached the sink's
	// destination so far: a MemorySink's Events, the lines a log sink
	// wrote, the rows a database sink stored, decoded. Required. A sink
	// that keeps a bounded number of records must have room for
	// [AuditKitRecords].
	Records func() []surface.AuditEvent
	// Flush returns once every record the sink accepted has reached the
	// destination or been counted lost: an asynchronous sink drains or
	// closes here. Nil for a sink that delivers before Record returns.
	Flush func()
	// Lost returns how many records the sink has lost: the Record calls
	// that returned an error, and the records it accepted but could not
	// deliver. Nil for a sink that never loses one (its Record never
	// fails).
	Lost func() uint64
	// Stall makes the destination stop taking records (a database that
	// hangs, a collector that does not read) until release is called;
	// release may be called more than once. Nil for a sink whose
	// destination cannot stall, which the kit then checks against the
	// live destination.
	Stall func() (release func())
}

// AuditKitRecords is the most records TestAuditSink hands one sink.
const AuditKitRecords = 1000

// auditKitBound is the failure limit of the kit's waits: the time within
// which Record calls that never block certainly return, however busy the
// machine. The kit never waits for it to pass.
const auditKitBound = 30 * time.Second

// TestAuditSink checks an [surface.AuditSink] against the contract of
// the interface, as testing/slogtest checks a slog.Handler. Each check
// runs on a fresh sink from newSink, as a subtest when t is a
// *testing.T (else one after the other, the first failure ending the
// run):
//
//   - Delivers: every record Record accepts reaches the destination
//     once, its fields intact.
//   - Concurrent: Record from many goroutines at once (and Records and
//     Lost meanwhile) loses nothing it accepted; run the kit with -race.
//   - NeverBlocks: with the destination stalled (Stall), hundreds of
//     Record calls all return; the sink queues or drops, never waits.
//   - CancelledContext: a record whose context is already cancelled, or
//     is cancelled once Record returns, still reaches the destination:
//     as for slog.Handler, cancellation must not affect processing.
//   - Registry: behind a registry, the sink is never given a context
//     that can be cancelled, and the records of a cancelled call arrive.
//
// In every check an error from Record means the record was lost: it never
// reaches the destination, and Lost counts it with every accepted record
// that did not arrive either. A sink that loses nothing needs no Lost; one
// that loses records uncounted fails.
//
// Record calls must return within a generous bound (30 s) that serves
// only as the failure limit: a check never waits for time to pass, so a
// busy machine slows it down without failing it.
func TestAuditSink(t testing.TB, newSink func(t testing.TB) AuditSinkUnderTest) {
	t.Helper()
	for _, c := range auditChecks {
		check := func(t testing.TB) {
			s := newSink(t)
			if s.Sink == nil || s.Records == nil {
				t.Fatalf("surfacetest.TestAuditSink: the factory must set Sink and Records")
			}
			c.run(t, s, auditKitBound)
		}
		if tt, ok := t.(*testing.T); ok {
			tt.Run(c.name, func(t *testing.T) { check(t) })
		} else {
			check(t)
		}
	}
}

// auditChecks are TestAuditSink's checks, in order.
var auditChecks = []struct {
	name string
	run  func(tb testing.TB, s AuditSinkUnderTest, bound time.Duration)
}{
	{"Delivers", auditDelivers},
	{"Concurrent", auditConcurrent},
	{"NeverBlocks", auditNeverBlocks},
	{"CancelledContext", auditCancelledContext},
	{"Registry", auditBehindRegistry},
}

// kitEvents returns n distinct records: every field the registry sets on
// its invocation records, times in milliseconds, invocation ids
// "kit-<check>-<i>".
func kitEvents(check string, n int) []surface.AuditEvent {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	types := []surface.AuditType{surface.AuditInvocationStarted, surface.AuditInvocationSettled}
	out := make([]surface.AuditEvent, n)
	for i := range out {
		e := surface.AuditEvent{
			At: base.Add(time.Duration(i) * time.Millisecond), Type: types[i%len(types)],
			CapabilityID: "view:kit.sink.act", RegistrationID: "reg_0001kit" + strconv.Itoa(i%10),
			InvocationID: "kit-" + check + "-" + strconv.Itoa(i), ConsumerID: "test:kit",
		}
		if e.Type == surface.AuditInvocationSettled {
			d := int64(i)
			e.Status, e.DurationMs = surface.StatusOK, &d
			if i%4 == 3 {
				e.Status, e.Code = surface.StatusError, surface.CodeRateLimited
			}
		}
		out[i] = e
	}
	return out
}

// sameRecord reports whether got carries the fields of want the kit
// sets.
func sameRecord(got, want surface.AuditEvent) bool {
	ms := func(d *int64) int64 {
		if d == nil {
			return -1
		}
		return *d
	}
	return got.Type == want.Type && got.At.Equal(want.At) && got.CapabilityID == want.CapabilityID &&
		got.RegistrationID == want.RegistrationID && got.InvocationID == want.InvocationID &&
		got.ConsumerID == want.ConsumerID && got.Status == want.Status && got.Code == want.Code &&
		ms(got.DurationMs) == ms(want.DurationMs)
}

// recordAll hands every record to the sink from workers goroutines, with
// ctx, and returns each call's error. It fails the test if the calls do
// not all return within the bound.
func recordAll(tb testing.TB, s AuditSinkUnderTest, bound time.Duration, ctx context.Context, events []surface.AuditEvent, workers int, during func()) []error {
	tb.Helper()
	errs := make([]error, len(events))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(events); i += workers {
				errs[i] = s.Sink.Record(ctx, events[i])
			}
		})
	}
	if during != nil {
		wg.Go(during)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	limit := time.NewTimer(bound)
	defer limit.Stop()
	select {
	case <-done:
	case <-limit.C: // the failure limit, never the expected path
		tb.Fatalf("%d Record calls from %d goroutines did not return within %v: Record blocks", len(events), workers, bound)
	}
	return errs
}

// account flushes the sink and checks what became of each record sent
// since the sink's loss count was lostBefore: an accepted record arrived
// once and intact or was counted lost; a refused one never arrived and
// was counted.
func account(tb testing.TB, s AuditSinkUnderTest, sent []surface.AuditEvent, errs []error, lostBefore uint64) {
	tb.Helper()
	if s.Flush != nil {
		s.Flush()
	}
	arrived := map[string]int{}
	byID := map[string]surface.AuditEvent{}
	for _, e := range s.Records() {
		arrived[e.InvocationID]++
		byID[e.InvocationID] = e
	}
	delivered, refused := 0, 0
	for i, e := range sent {
		n := arrived[e.InvocationID]
		delete(arrived, e.InvocationID)
		switch {
		case n > 1:
			tb.Errorf("record %s arrived %d times", e.InvocationID, n)
		case errs[i] != nil && n > 0:
			tb.Errorf("Record returned %v for %s, yet it arrived: an error must mean the record was lost", errs[i], e.InvocationID)
		case n == 1 && !sameRecord(byID[e.InvocationID], e):
			tb.Errorf("record %s arrived changed:\n got %+v\nwant %+v", e.InvocationID, byID[e.InvocationID], e)
		}
		if n > 0 {
			delivered++
		}
		if errs[i] != nil {
			refused++
		}
	}
	for id := range arrived {
		tb.Errorf("a record the kit did not send arrived: %q", id)
	}
	lost := uint64(len(sent) - delivered)
	tb.Logf("%d records sent: %d delivered, %d refused with an error, %d lost", len(sent), delivered, refused, lost)
	if s.Lost == nil {
		if lost > 0 {
			tb.Errorf("%d of %d records were lost (%d refused with an error) and the sink has no Lost count: a lost record must be counted",
				lost, len(sent), refused)
		}
		return
	}
	if counted := s.Lost() - lostBefore; counted != lost {
		tb.Errorf("%d of %d records were lost (%d refused with an error), the sink counted %d", lost, len(sent), refused, counted)
	}
}

func lostSoFar(s AuditSinkUnderTest) uint64 {
	if s.Lost == nil {
		return 0
	}
	return s.Lost()
}

func auditDelivers(tb testing.TB, s AuditSinkUnderTest, bound time.Duration) {
	sent := kitEvents("delivers", 50)
	before := lostSoFar(s)
	errs := recordAll(tb, s, bound, context.Background(), sent, 1, nil)
	for i, err := range errs {
		if err != nil {
			tb.Errorf("Record(%s) with nothing queued: %v", sent[i].InvocationID, err)
		}
	}
	account(tb, s, sent, errs, before)
}

func auditConcurrent(tb testing.TB, s AuditSinkUnderTest, bound time.Duration) {
	sent := kitEvents("concurrent", 400)
	before := lostSoFar(s)
	errs := recordAll(tb, s, bound, context.Background(), sent, 8, func() {
		for range 3 { // read while others write
			_ = s.Records()
			_ = lostSoFar(s)
		}
	})
	account(tb, s, sent, errs, before)
}

func auditNeverBlocks(tb testing.TB, s AuditSinkUnderTest, bound time.Duration) {
	before := lostSoFar(s)
	release := func() {}
	if s.Stall != nil {
		release = sync.OnceFunc(s.Stall())
		tb.Cleanup(release) // a failed check must not leave the destination stalled
	} else {
		tb.Logf("no Stall hook: Record is checked against the live destination")
	}
	sent := kitEvents("stalled", 500)
	errs := recordAll(tb, s, bound, context.Background(), sent, 4, nil)
	release()
	account(tb, s, sent, errs, before)
}

type kitKey struct{}

func auditCancelledContext(tb testing.TB, s AuditSinkUnderTest, bound time.Duration) {
	before := lostSoFar(s)
	sent := kitEvents("cancelled", 3)
	errs := make([]error, len(sent))
	valued := context.WithValue(context.Background(), kitKey{}, "kit")

	cancelled, cancel := context.WithCancel(valued)
	cancel()
	errs[0] = recordAll(tb, s, bound, cancelled, sent[0:1], 1, nil)[0]

	expired, cancel := context.WithDeadline(valued, time.Unix(0, 0))
	defer cancel()
	errs[1] = recordAll(tb, s, bound, expired, sent[1:2], 1, nil)[0]

	live, cancel := context.WithCancel(valued)
	errs[2] = recordAll(tb, s, bound, live, sent[2:3], 1, nil)[0]
	cancel() // once Record returned: an asynchronous sink still holds the record

	for i, err := range errs {
		if err != nil {
			tb.Errorf("Record(%s) with a cancelled context: %v; cancellation must not lose a record", sent[i].InvocationID, err)
		}
	}
	account(tb, s, sent, errs, before)
}

// ctxProbe forwards to the sink under test and remembers whether the
// registry ever handed it a context that can be cancelled.
type ctxProbe struct {
	next        surface.AuditSink
	mu          sync.Mutex
	cancellable []string
}

func (p *ctxProbe) Record(ctx context.Context, e surface.AuditEvent) error {
	if ctx.Done() != nil {
		p.mu.Lock()
		p.cancellable = append(p.cancellable, fmt.Sprintf("%s %s", e.Type, e.InvocationID))
		p.mu.Unlock()
	}
	return p.next.Record(ctx, e)
}

func auditBehindRegistry(tb testing.TB, s AuditSinkUnderTest, _ time.Duration) {
	probe := &ctxProbe{next: s.Sink}
	reg := surface.New(&surface.Options{Environment: surface.EnvTest, Audit: probe, Logger: slog.New(slog.DiscardHandler)})
	closed := false
	defer func() {
		if !closed {
			_ = reg.Close()
		}
	}()
	type none = surface.None
	MustRegister(tb, reg, surface.Component{Type: "kit.sink", Description: "The audit kit's component",
		Actions: map[string]surface.Capability{
			"act": surface.Action(surface.ActionDef[none, none]{Description: "Acts until its call is cancelled",
				Effect: surface.EffectLocalState, Audit: surface.AuditLevelMetadata,
				Execute: func(ctx context.Context, _ *surface.Call, _ none) (none, error) {
					if cancel, ok := ctx.Value(kitKey{}).(context.CancelFunc); ok {
						cancel() // the caller gives up mid-call
						<-ctx.Done()
						return none{}, ctx.Err()
					}
					return none{}, nil
				}}),
		}})
	as := surface.InvokeOptions{Consumer: Consumer()}
	before, cancelBefore := context.WithCancel(context.Background())
	cancelBefore()
	first := reg.Invoke(before, surface.Invocation{CapabilityID: "view:kit.sink.act", InvocationID: "kit-registry-cancelled-before"}, as)
	during, cancelDuring := context.WithCancel(context.Background())
	during = context.WithValue(during, kitKey{}, cancelDuring)
	second := reg.Invoke(during, surface.Invocation{CapabilityID: "view:kit.sink.act", InvocationID: "kit-registry-cancelled-during"}, as)
	cancelDuring()
	third := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "view:kit.sink.act", InvocationID: "kit-registry-ok"}, as)
	closed = true
	if err := reg.Close(); err != nil {
		tb.Errorf("closing the registry: %v", err)
	}
	if s.Flush != nil {
		s.Flush()
	}
	probe.mu.Lock()
	cancellable := probe.cancellable
	probe.mu.Unlock()
	if len(cancellable) > 0 {
		tb.Errorf("the registry handed the sink a context that can be cancelled, for %q", cancellable)
	}
	settled := map[string]bool{}
	for _, e := range s.Records() {
		if e.Type == surface.AuditInvocationSettled {
			settled[e.InvocationID] = true
		}
	}
	for _, res := range []surface.Result{first, second, third} {
		if !settled[res.InvocationID] {
			code := surface.Code("ok")
			if res.Error != nil {
				code = res.Error.Code
			}
			tb.Errorf("no invocation-settled record arrived for %s (%s)", res.InvocationID, code)
		}
	}
}
