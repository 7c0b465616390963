package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/webhost"
)

// idleSessions makes n idle sessions as an agent leaves them: the views
// mounted (as a page's would be), the MCP endpoint made (its server
// following the registry). (An open page's event stream adds webhost's
// subscriber, which webhost's own BenchmarkIdleSessionHeap counts.) It
// returns the heap growth per session and the goroutines added.
func idleSessions(tb testing.TB, app *App, n int) (bytesPerSession float64, goroutines int, sessions []*Session) {
	tb.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	sessions = make([]*Session, 0, n)
	for range n {
		s, err := app.NewSession(SessionOptions{KeepShown: true})
		if err != nil {
			tb.Fatal(err)
		}
		openMCPServer(tb, app, s)
		sessions = append(sessions, s)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	goroutines = runtime.NumGoroutine() - g0
	bytesPerSession = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	runtime.KeepAlive(sessions)
	return bytesPerSession, goroutines, sessions
}

// openMCPServer makes the session's MCP server as a client's first
// request does.
func openMCPServer(tb testing.TB, app *App, s *Session) {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token())
	rec := httptest.NewRecorder()
	app.ServeHTTP(rec, req)
	if rec.Code == http.StatusUnauthorized {
		tb.Fatalf("/mcp: %d", rec.Code)
	}
}

func newTestApp(tb testing.TB) *App {
	tb.Helper()
	store, err := domain.Open(context.Background(), filepath.Join(tb.TempDir(), "devices.db"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := store.Seed(context.Background()); err != nil {
		tb.Fatal(err)
	}
	app, err := New(Options{Store: store, Host: webhost.Options{MaxSessions: 1 << 20}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = app.Close()
		_ = store.Close()
	})
	return app
}

// BenchmarkIdleSessionHeap reports the heap one idle browser session
// holds: its registry with the table mounted and its MCP server (target
// ≤ 64 KiB).
func BenchmarkIdleSessionHeap(b *testing.B) {
	app := newTestApp(b)
	const n = 500
	var per float64
	b.ResetTimer()
	for b.Loop() {
		p, _, sessions := idleSessions(b, app, n)
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

// BenchmarkTenThousandIdleSessions holds 10,000 idle sessions in one
// process and reports the heap they use and the goroutines they add.
func BenchmarkTenThousandIdleSessions(b *testing.B) {
	app := newTestApp(b)
	for b.Loop() {
		per, goroutines, sessions := idleSessions(b, app, 10000)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(per, "B/session")
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(goroutines), "goroutines-added")
		b.StopTimer()
		for _, s := range sessions {
			s.Close()
		}
		b.StartTimer()
	}
}

// Many idle sessions in one process: no goroutine per idle session (an
// open event stream's handler is the only one, and these have none), and
// the heap grows by the per-session figure, within the 64 KiB budget. The
// figures are logged; BenchmarkTenThousandIdleSessions has them for 10,000.
func TestManyIdleSessions(t *testing.T) {
	app := newTestApp(t)
	start := time.Now()
	per, goroutines, sessions := idleSessions(t, app, manyIdleSessions)
	elapsed := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d idle sessions in %v: %.1f KiB heap per session, heap in use %.1f MiB, %d goroutines added, %d in all",
		len(sessions), elapsed.Round(time.Millisecond), per/1024, float64(ms.HeapAlloc)/(1<<20), goroutines, runtime.NumGoroutine())
	if goroutines > 16 {
		t.Fatalf("%d goroutines for %d idle sessions", goroutines, len(sessions))
	}
	if per > 64<<10 {
		t.Errorf("%.1f KiB per idle session, over the 64 KiB budget", per/1024)
	}
	// They are usable: the last one answers a read through its registry.
	s := sessions[len(sessions)-1]
	if _, err := s.tableState(context.Background()); err != nil {
		t.Fatal(err)
	}
}
