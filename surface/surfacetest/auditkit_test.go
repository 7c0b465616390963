package surfacetest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// brokenSink breaks the AuditSink contract in the ways the kit must
// catch; the zero value keeps it.
type brokenSink struct {
	mem *surface.MemorySink

	blockWhileStalled bool // Record waits for the stalled destination
	dropSilently      bool // every other record vanishes, Record says nil
	errButKeep        bool // every other Record fails yet keeps the record
	obeyContext       bool // a cancelled context loses the record
	duplicate         bool // every record arrives twice
	changeFields      bool // the capability id is lost on the way

	mu     sync.Mutex
	n      int
	failed uint64
	gate   chan struct{}
}

func newBroken() *brokenSink {
	return &brokenSink{mem: surface.NewMemorySink(surfacetest.AuditKitRecords)}
}

func (b *brokenSink) Record(ctx context.Context, e surface.AuditEvent) error {
	b.mu.Lock()
	b.n++
	odd, gate := b.n%2 == 1, b.gate
	b.mu.Unlock()
	if gate != nil && b.blockWhileStalled {
		<-gate
	}
	switch {
	case b.obeyContext && ctx.Err() != nil:
		b.count()
		return ctx.Err()
	case b.dropSilently && odd:
		return nil
	case b.errButKeep && odd:
		b.count()
		_ = b.mem.Record(ctx, e)
		return errors.New("lost, allegedly")
	case b.changeFields:
		e.CapabilityID = ""
	case b.duplicate:
		_ = b.mem.Record(ctx, e)
	}
	return b.mem.Record(ctx, e)
}

func (b *brokenSink) count() {
	b.mu.Lock()
	b.failed++
	b.mu.Unlock()
}

func (b *brokenSink) underTest() surfacetest.AuditSinkUnderTest {
	return surfacetest.AuditSinkUnderTest{
		Sink: b, Records: b.mem.Events,
		Lost: func() uint64 {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.failed
		},
		Stall: func() func() {
			gate := make(chan struct{})
			b.mu.Lock()
			b.gate = gate
			b.mu.Unlock()
			return sync.OnceFunc(func() { close(gate) })
		},
	}
}

// The kit passes a sink that keeps the contract and fails each breach,
// saying which.
func TestAuditKitCatchesBrokenSinks(t *testing.T) {
	const bound = 30 * time.Second
	for _, name := range []string{"Delivers", "Concurrent", "NeverBlocks", "CancelledContext", "Registry"} {
		passes(t, func(tb *fakeTB) { surfacetest.RunAuditCheck(tb, name, newBroken().underTest(), bound) })
	}

	// A sink that blocks: the kit gives up at its failure limit (short
	// here: the sink never returns until released).
	b := newBroken()
	b.blockWhileStalled = true
	fatal(t, func(tb *fakeTB) { surfacetest.RunAuditCheck(tb, "NeverBlocks", b.underTest(), 50*time.Millisecond) },
		"did not return within", "Record blocks")

	for _, c := range []struct {
		name   string
		check  string
		breaks func(*brokenSink)
		noLost bool
		want   string
	}{
		{"silent drop", "Delivers", func(b *brokenSink) { b.dropSilently = true }, false, "the sink counted 0"},
		{"silent drop, no Lost", "Concurrent", func(b *brokenSink) { b.dropSilently = true }, true, "has no Lost count"},
		{"error yet kept", "Delivers", func(b *brokenSink) { b.errButKeep = true }, false, "an error must mean the record was lost"},
		{"context obeyed", "CancelledContext", func(b *brokenSink) { b.obeyContext = true }, false, "cancellation must not lose a record"},
		{"duplicated", "Delivers", func(b *brokenSink) { b.duplicate = true }, false, "arrived 2 times"},
		{"changed", "Concurrent", func(b *brokenSink) { b.changeFields = true }, false, "arrived changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBroken()
			c.breaks(b)
			s := b.underTest()
			if c.noLost {
				s.Lost = nil
			}
			failsWith(t, func(tb *fakeTB) { surfacetest.RunAuditCheck(tb, c.check, s, bound) }, c.want)
		})
	}
}

// failsWith runs fn with a fake test and fails t unless fn failed it with
// a message containing want.
func failsWith(t *testing.T, fn func(tb *fakeTB), want string) {
	t.Helper()
	f := newFakeTB(t)
	f.run(func() { fn(f) })
	f.mu.Lock()
	msgs := append(append([]string(nil), f.errors...), f.fatals...)
	f.mu.Unlock()
	for _, m := range msgs {
		if strings.Contains(m, want) {
			return
		}
	}
	t.Fatalf("failures %q; want one saying %q", msgs, want)
}
