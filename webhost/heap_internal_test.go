package webhost

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// counterViews is a small page: one component with an observation and
// two actions, one fragment.
type counterViews struct {
	mu sync.Mutex
	n  int
}

type step struct {
	By int `json:"by"`
}

func (v *counterViews) Mount(ctx context.Context, s *Session) error {
	_, err := s.Registry().RegisterContext(ctx, surface.Component{
		Type: "demo.counter", InstanceID: "main", Description: "A counter",
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[int]{
				Description: "Read the counter",
				Read: func(context.Context, *surface.Call) (int, error) {
					v.mu.Lock()
					defer v.mu.Unlock()
					return v.n, nil
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"add": surface.Action(surface.ActionDef[step, surface.None]{
				Description: "Add to the counter", Effect: surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in step) (surface.None, error) {
					v.mu.Lock()
					v.n += in.By
					v.mu.Unlock()
					s.Changed("counter")
					return surface.None{}, nil
				},
			}),
			"reset": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Reset the counter", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					v.mu.Lock()
					v.n = 0
					v.mu.Unlock()
					s.Changed("counter")
					return surface.None{}, nil
				},
			}),
		},
	})
	return err
}

func (v *counterViews) Fragment(_ context.Context, w io.Writer, id string) error {
	if id != "counter" {
		return ErrNoFragment
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, err := fmt.Fprintf(w, "%d", v.n)
	return err
}

func newTestHost(tb testing.TB) *Host {
	tb.Helper()
	h, err := New(Options{NewViews: func(*Session) (Views, error) { return &counterViews{}, nil }, MaxSessions: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h
}

// idleSessions makes n idle sessions as a page and an agent leave them:
// the views mounted, the MCP server made (following the registry), one
// event-stream subscriber registered. It returns the heap growth per
// session and the goroutines added.
func idleSessions(tb testing.TB, h *Host, n int) (bytesPerSession float64, goroutines int, sessions []*Session) {
	tb.Helper()
	handler := h.Handler(nil)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	sessions = make([]*Session, 0, n)
	for range n {
		s, err := h.NewSession(SessionOptions{KeepShown: true})
		if err != nil {
			tb.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token())
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code == http.StatusUnauthorized {
			tb.Fatalf("/mcp: %d", rec.Code)
		}
		if _, ok := s.streamOpened([]string{"counter"}, false); !ok {
			tb.Fatal("stream")
		}
		sessions = append(sessions, s)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	goroutines = runtime.NumGoroutine() - g0
	bytesPerSession = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	runtime.KeepAlive(sessions)
	return bytesPerSession, goroutines, sessions
}

// BenchmarkIdleSessionHeap reports the heap one idle session holds: its
// registry with its component mounted, its MCP server and an
// event-stream subscriber.
func BenchmarkIdleSessionHeap(b *testing.B) {
	h := newTestHost(b)
	const n = 500
	var per float64
	for b.Loop() {
		p, _, sessions := idleSessions(b, h, n)
		per = p
		b.StopTimer()
		for _, s := range sessions {
			s.Close()
		}
		b.StartTimer()
	}
	b.ReportMetric(per, "B/session")
	b.ReportMetric(0, "ns/op")
}

// Many idle sessions in one process: no goroutine per idle session, and
// a bounded heap each (the console's budget, 64 KiB).
func TestManyIdleSessions(t *testing.T) {
	h := newTestHost(t)
	per, goroutines, sessions := idleSessions(t, h, manyIdleSessions)
	t.Logf("%d idle sessions: %.1f KiB heap per session, %d goroutines added", len(sessions), per/1024, goroutines)
	if goroutines > 16 {
		t.Fatalf("%d goroutines for %d idle sessions", goroutines, len(sessions))
	}
	if per > 64<<10 {
		t.Errorf("%.1f KiB per idle session, over the 64 KiB budget", per/1024)
	}
}
