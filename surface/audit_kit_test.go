package surface_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// The sinks of package surface keep the AuditSink contract (its doc
// comment; spec 06, Audit): the conformance kit runs against each.

func TestMemorySinkConformance(t *testing.T) {
	surfacetest.TestAuditSink(t, func(t testing.TB) surfacetest.AuditSinkUnderTest {
		s := surface.NewMemorySink(surfacetest.AuditKitRecords)
		return surfacetest.AuditSinkUnderTest{Sink: s, Records: s.Events}
	})
}

// SlogSink writes synchronously to its logger: its destination is the
// logger's handler, which the sink cannot make stall-proof (a slow
// handler belongs behind an AsyncSink), so it has no Stall hook.
func TestSlogSinkConformance(t *testing.T) {
	surfacetest.TestAuditSink(t, func(t testing.TB) surfacetest.AuditSinkUnderTest {
		w := &lockedBuffer{}
		s := surface.NewSlogSink(slog.New(slog.NewJSONHandler(w, nil)))
		return surfacetest.AuditSinkUnderTest{Sink: s, Records: func() []surface.AuditEvent {
			var out []surface.AuditEvent
			for _, line := range w.lines() {
				var r struct {
					Msg string `json:"msg"`
					surface.AuditEvent
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil || r.Msg != "audit" {
					t.Fatalf("a line that is not an audit record: %q (%v)", line, err)
				}
				out = append(out, r.AuditEvent)
			}
			return out
		}}
	})
}

// The development console writes one line per record, like SlogSink,
// and keeps the contract too (AS-OBSV-002).
func TestConsoleSinkConformance_AS_OBSV_002(t *testing.T) {
	surfacetest.TestAuditSink(t, func(t testing.TB) surfacetest.AuditSinkUnderTest {
		w := &lockedBuffer{}
		return surfacetest.AuditSinkUnderTest{Sink: surface.NewConsoleSink(w), Records: func() []surface.AuditEvent {
			var out []surface.AuditEvent
			for _, line := range w.lines() {
				out = append(out, parseConsoleLine(t, line))
			}
			return out
		}}
	})
}

// AsyncSink in front of a destination the kit can stall: a memory sink
// behind a gate.
func TestAsyncSinkConformance(t *testing.T) {
	surfacetest.TestAuditSink(t, func(t testing.TB) surfacetest.AuditSinkUnderTest {
		dest := &gatedSink{mem: surface.NewMemorySink(surfacetest.AuditKitRecords)}
		s := surface.NewAsyncSink(dest, 64)
		t.Cleanup(func() { _ = s.Close() })
		return surfacetest.AuditSinkUnderTest{
			Sink:    s,
			Records: dest.mem.Events,
			Flush:   func() { _ = s.Close() },
			Lost:    func() uint64 { return s.Dropped() + s.Failed() },
			Stall:   dest.stall,
		}
	})
}

// gatedSink records into a memory sink, except while stalled: then Record
// waits until release.
type gatedSink struct {
	mem  *surface.MemorySink
	mu   sync.Mutex
	gate chan struct{} // closed: open; nil: never stalled
}

func (g *gatedSink) Record(ctx context.Context, e surface.AuditEvent) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.mem.Record(ctx, e)
}

func (g *gatedSink) stall() (release func()) {
	gate := make(chan struct{})
	g.mu.Lock()
	g.gate = gate
	g.mu.Unlock()
	return sync.OnceFunc(func() { close(gate) })
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// parseConsoleLine decodes a line of the development console:
// "[agent-surface audit]" then key=value, values Go-quoted when needed.
func parseConsoleLine(t testing.TB, line string) surface.AuditEvent {
	t.Helper()
	rest, ok := strings.CutPrefix(line, "[agent-surface audit] ")
	if !ok {
		t.Fatalf("not a console line: %q", line)
	}
	fields := map[string]string{}
	for rest != "" {
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			t.Fatalf("no value after %q in %q", rest, line)
		}
		var value string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			value, _ = strconv.Unquote(q)
			after = after[len(q):]
		} else {
			value, after, _ = strings.Cut(after, " ")
			after = " " + after
		}
		fields[key] = value
		rest = strings.TrimPrefix(after, " ")
	}
	e := surface.AuditEvent{Type: surface.AuditType(fields["type"]), CapabilityID: fields["capabilityId"],
		RegistrationID: fields["registrationId"], InvocationID: fields["invocationId"], ConsumerID: fields["consumerId"],
		Status: surface.ResultStatus(fields["status"]), Code: surface.Code(fields["code"])}
	var err error
	if e.At, err = time.Parse(time.RFC3339, fields["at"]); err != nil {
		t.Fatalf("at in %q: %v", line, err)
	}
	if d, ok := fields["durationMs"]; ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			t.Fatalf("durationMs in %q: %v", line, err)
		}
		e.DurationMs = &n
	}
	return e
}
