package mcpsurface_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// slowWork is the state behind the "work" component: its observation
// slow holds each read until gate closes (or its context ends), and
// reports entering on the channel registered for the invocation id.
type slowWork struct {
	mu      sync.Mutex
	gate    chan struct{}
	entered map[string]chan struct{}
}

func newSlowWork() *slowWork {
	return &slowWork{gate: make(chan struct{}), entered: map[string]chan struct{}{}}
}

// release lets the reads in progress return; later reads wait again.
func (w *slowWork) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.gate)
	w.gate = make(chan struct{})
}

// expect returns the channel closed when invocation id starts reading.
func (w *slowWork) expect(id string) <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	w.entered[id] = ch
	w.mu.Unlock()
	return ch
}

func (w *slowWork) component() surface.Component {
	return surface.Component{
		Type: "work", Description: "Slow work",
		Observations: map[string]surface.Capability{
			"slow": surface.Observation(surface.ObservationDef[string]{
				Description: "Takes a while",
				Read: func(ctx context.Context, call *surface.Call) (string, error) {
					w.mu.Lock()
					if ch, ok := w.entered[call.InvocationID]; ok {
						close(ch)
						delete(w.entered, call.InvocationID)
					}
					gate := w.gate
					w.mu.Unlock()
					select {
					case <-gate:
					case <-ctx.Done():
					}
					return "done", nil
				},
			}),
		},
	}
}

// goroutines returns the goroutines runtime.Stack lists: those of the
// program, without the runtime's own (runtime.NumGoroutine may count a
// runtime cleanup goroutine for a moment).
func goroutines() (n int, stacks string) {
	buf := make([]byte, 1<<20)
	stacks = string(buf[:runtime.Stack(buf, true)])
	return strings.Count(stacks, "\ngoroutine ") + 1, stacks
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Load: users × sessions over HTTP, each calling tools; a third close
// properly (DELETE), a third leave without DELETE, a third drop a request
// mid-call and leave. After the session and server idle timeouts every
// session and every cached Server is gone, and goroutines and heap are
// back at their baseline. It is bounded by operation counts (users,
// sessions, calls) and runs under synctest over in-memory connections,
// so the timeouts pass on the fake clock and nothing depends on the
// machine's speed. The same load runs twice and the second is measured:
// the first fills what is allocated once (type caches, the registries'
// bounded audit and dedupe stores).
func TestLoadAbandonedSessionsAreReclaimed(t *testing.T) {
	const (
		users           = 4
		sessionsPerUser = 15 // within DefaultMaxSessions, so none is refused
		callsPerSession = 3
		workers         = 8
		timeout         = time.Minute
	)
	synctest.Test(t, func(t *testing.T) {
		work := newSlowWork()
		sessions := map[string]*session{}
		for u := range users {
			reg, a, _ := newAppWith(t, &surface.Options{Limits: surface.Limits{DedupeCacheSize: 1}, Audit: surface.NewMemorySink(1)})
			surfacetest.MustRegister(t, reg, work.component())
			sessions[fmt.Sprint("tok-", u)] = &session{reg: reg, app: a, consumer: surface.Consumer{ID: fmt.Sprint("user-", u)}}
		}
		f := &httpFixture{sessions: sessions}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{SessionTimeout: timeout, IdleTimeout: timeout})
		p := servePipe(f.h)
		defer p.stop()
		defer f.h.Close()

		// load runs the sessions and returns the figures at the peak.
		load := func(pass int) (peak int, heap uint64, open int) {
			type job struct {
				token string
				kind  int // 0 DELETE, 1 leave, 2 drop mid-call and leave
			}
			jobs := make(chan job)
			var wg sync.WaitGroup
			errs := make(chan error, users*sessionsPerUser)
			for range workers {
				wg.Go(func() {
					for j := range jobs {
						if err := runSession(p, j.token, j.kind, callsPerSession, work, pass); err != nil {
							errs <- fmt.Errorf("%s kind %d: %w", j.token, j.kind, err)
						}
					}
				})
			}
			for s := range sessionsPerUser {
				for u := range users {
					jobs <- job{fmt.Sprint("tok-", u), s % 3}
				}
			}
			close(jobs)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			peak, _ = goroutines()
			heap, open = heapInUse(), mcpsurface.OpenSessions(f.h)
			work.release() // the dropped calls finish; their results have nowhere to go
			p.tr.CloseIdleConnections()
			time.Sleep(3 * timeout) // the sessions' idle timeout, then the servers'
			synctest.Wait()
			if s, n := mcpsurface.OpenSessions(f.h), mcpsurface.CachedServers(f.h); s != 0 || n != 0 {
				t.Fatalf("pass %d: not reclaimed: %d sessions, %d servers", pass, s, n)
			}
			return peak, heap, open
		}

		load(1)
		baseHeap := heapInUse()
		baseGoroutines, _ := goroutines()
		peakGoroutines, peakHeap, peakSessions := load(2)
		heap := heapInUse()
		g, stacks := goroutines()
		t.Logf("%d sessions × %d calls: goroutines %d → peak %d → %d; heap %d KiB → peak %d KiB (%d sessions open) → %d KiB",
			users*sessionsPerUser, callsPerSession, baseGoroutines, peakGoroutines, g, baseHeap>>10, peakHeap>>10, peakSessions, heap>>10)
		if g > baseGoroutines {
			t.Fatalf("%d goroutines, baseline %d\n%s", g, baseGoroutines, stacks)
		}
		if want := users * sessionsPerUser * 2 / 3; peakSessions < want {
			t.Fatalf("%d sessions open at the peak, want %d: the load did not happen", peakSessions, want)
		}
		if heap > baseHeap+48<<10 {
			t.Fatalf("heap %d KiB, baseline %d KiB", heap>>10, baseHeap>>10)
		}
	})
}

// runSession opens one session for token and makes calls: kind 0 with
// the SDK client, closed with DELETE; kind 1 by hand, left open; kind 2 by
// hand, the last call dropped mid-call, left open.
func runSession(p *pipeHTTP, token string, kind, calls int, work *slowWork, pass int) error {
	if kind == 0 {
		mt := &mcp.StreamableClientTransport{Endpoint: "http://pipe/mcp", MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token, p.tr}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "load", Version: "1"}, nil).Connect(bg, mt, &mcp.ClientSessionOptions{ProtocolVersion: v2025})
		if err != nil {
			return err
		}
		defer cs.Close()
		for i := range calls {
			res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "view_devices__table__selectRows", Arguments: map[string]any{"ids": []string{fmt.Sprint("d", i)}}})
			if err != nil || res.IsError {
				return fmt.Errorf("call %d: %v %+v", i, err, res)
			}
		}
		return nil
	}
	c := rawClient{p.client, "http://pipe/mcp", token}
	status, sid, _, err := c.post(bg, "", rawInit)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("initialize: %d %v", status, err)
	}
	if status, _, _, err := c.post(bg, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || status != http.StatusAccepted {
		return fmt.Errorf("initialized: %d %v", status, err)
	}
	for i := range calls {
		status, resp, err := c.call(bg, sid, i+2, "view_devices__table__readState", `{}`)
		if err != nil || status != http.StatusOK || resp == nil || resp.Error != nil {
			return fmt.Errorf("call %d: %d %v %+v", i, status, err, resp)
		}
	}
	if kind == 2 {
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		id := fmt.Sprint("load-", pass, "-", sid)
		entered := work.expect(id)
		done := make(chan error, 1)
		go func() {
			status, _, _, err := c.post(ctx, sid, `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"view_work__slow","arguments":{},"_meta":{"agentsurface/invocationId":"`+id+`"}}}`)
			if err == nil {
				err = fmt.Errorf("the slow call returned %d", status)
			}
			done <- err
		}()
		select {
		case <-entered: // the handler runs: drop the connection mid-call
			cancel()
			<-done
		case err := <-done:
			return err
		}
	}
	return nil
}
