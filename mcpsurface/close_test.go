package mcpsurface_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldLog is a slog.Handler that records every message and, while held,
// keeps each Handle call of a message containing match waiting until
// release, so that a test sees that record being written.
type heldLog struct {
	mu      sync.Mutex
	held    chan struct{} // nil: not held
	match   string
	writing int // Handle calls in progress
	msgs    []string
}

func (l *heldLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *heldLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *heldLog) WithGroup(string) slog.Handler            { return l }

func (l *heldLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.writing++
	l.msgs = append(l.msgs, r.Message)
	held := l.held
	if !strings.Contains(r.Message, l.match) {
		held = nil
	}
	l.mu.Unlock()
	if held != nil {
		<-held
	}
	l.mu.Lock()
	l.writing--
	l.mu.Unlock()
	return nil
}

// hold makes later Handle calls of messages containing match wait until
// release.
func (l *heldLog) hold(match string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.match = make(chan struct{}), match
}

func (l *heldLog) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		close(l.held)
		l.held = nil
	}
}

// state returns the records written so far and how many are being
// written.
func (l *heldLog) state() (msgs []string, writing int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...), l.writing
}

// A change notification the SDK is sending when Close is called has been
// sent, and what it logged written, when Close returns; nothing is
// logged after. The SDK sends notifications/tools/list_changed from a
// timer's goroutine 10 ms after a change, to every stateful session; to
// one that never opened its stream it cannot, and it logs so (debug, once
// per Server). Here that record is being written when Close is called.
// Before, Close returned meanwhile and the record reached the
// application's logger after it: the devices demo's transcript raced with
// its test reading it.
func TestCloseWaitsForTheChangeNotificationInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		users := twoUsers(t)
		logs := &heldLog{}
		f := &httpFixture{sessions: users}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{Options: mcpsurface.Options{Logger: slog.New(logs)}})
		p := servePipe(f.h)
		defer p.stop()
		alice := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
		alice.open(t) // a stateful session with no stream
		synctest.Wait()
		logs.hold("notifications/tools/list_changed")
		s := users["tok-alice"]
		surfacetest.MustRegister(t, s.reg, s.app.table("extra")) // the SDK schedules list_changed
		time.Sleep(time.Second)                                  // its timer fires: its record is being written
		synctest.Wait()
		if _, writing := logs.state(); writing != 1 {
			t.Fatalf("%d records being written, want the SDK's about the notification", writing)
		}
		closed := make(chan struct{})
		var atClose []string // what had been logged when Close returned
		var writingAtClose int
		go func() {
			_ = f.h.Close()
			atClose, writingAtClose = logs.state()
			close(closed)
		}()
		synctest.Wait()
		logs.release()
		<-closed
		time.Sleep(time.Second)
		synctest.Wait()
		after, writing := logs.state()
		if writingAtClose != 0 || len(after) != len(atClose) || writing != 0 {
			t.Fatalf("Close returned with %d records being written; logged after it: %q", writingAtClose, after[len(atClose):])
		}
	})
}

// A change notification the SDK has scheduled when Close is called is
// cancelled: it is not sent, not even to a session connected after
// Close, and the SDK's timer is gone (ScheduledChangeNotifications reads
// it), so no goroutine of it runs after Close.
func TestServerCloseCancelsTheScheduledNotification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, a, _ := newApp(t)
		srv := newServer(t, reg, nil)
		cs := connect(t, srv, v2025, nil)
		listTools(t, cs)
		surfacetest.MustRegister(t, reg, a.domainPanel())
		if n := mcpsurface.ScheduledChangeNotifications(srv); n != 1 {
			t.Fatalf("%d notifications scheduled after a change, want 1", n)
		}
		tools := len(toolsOf(srv.MCP()))
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if n := mcpsurface.ScheduledChangeNotifications(srv); n != 0 {
			t.Fatalf("%d notifications still scheduled after Close", n)
		}
		if n := len(toolsOf(srv.MCP())); n != tools {
			t.Fatalf("%d tools after Close, want %d: Close changed the list", n, tools)
		}
		heard := make(chan struct{}, 1)
		witness := connect(t, srv, v2025, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			heard <- struct{}{}
		}})
		time.Sleep(time.Second) // well past the SDK's delay
		synctest.Wait()
		select {
		case <-heard:
			t.Fatal("a session connected after Close heard the change made before it")
		default:
		}
		_ = witness.Close()
		_ = cs.Close()
	})
}
