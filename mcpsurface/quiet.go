package mcpsurface

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Nothing a Server or an HTTPHandler starts outlives its Close, and
// nothing is written for it afterwards: no log record, no message to a
// client. The SDK sends notifications/…/list_changed from a timer, 10 ms
// after a change (merging the changes meanwhile), on a goroutine of its
// own; Close cancels a notification so scheduled and waits for one being
// sent. Everything the SDK and this package log for a Server, and every
// message the SDK sends to its clients, passes the Server's gate, which
// Close shuts once its sessions are closed.

// gate lets work through until it is shut; shut waits for the work that
// got through, and after it nothing passes. Passes may nest. The zero
// value is open.
type gate struct {
	mu     sync.Mutex
	shut   bool
	passes sync.WaitGroup
}

// enter reports whether the gate is open, and if so counts a pass, which
// the caller ends with exit.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return false
	}
	g.passes.Add(1) // before close's Wait: shut is set under mu
	return true
}

// exit ends a pass.
func (g *gate) exit() { g.passes.Done() }

// close shuts the gate and waits for the passes in progress. It must not
// be called from within a pass.
func (g *gate) close() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
	g.passes.Wait()
}

// quietLog is a slog.Handler that hands records to its Handler while its
// gate is open, and drops them once the gate is shut.
type quietLog struct {
	slog.Handler
	gate *gate
}

// quieted returns l writing through g.
func quieted(l *slog.Logger, g *gate) *slog.Logger {
	return slog.New(quietLog{Handler: l.Handler(), gate: g})
}

// Handle implements slog.Handler.
func (q quietLog) Handle(ctx context.Context, r slog.Record) error {
	if !q.gate.enter() {
		return nil
	}
	defer q.gate.exit()
	return q.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (q quietLog) WithAttrs(as []slog.Attr) slog.Handler {
	return quietLog{Handler: q.Handler.WithAttrs(as), gate: q.gate}
}

// WithGroup implements slog.Handler.
func (q quietLog) WithGroup(name string) slog.Handler {
	return quietLog{Handler: q.Handler.WithGroup(name), gate: q.gate}
}

// outgoing is sending middleware: every request and notification the SDK
// sends to a client of this Server passes its gate, so that Close waits
// for one in flight and none is sent after it. Notifications meant for
// sessions that Close is ending are dropped: they have no one to reach.
func (s *Server) outgoing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		notification := strings.HasPrefix(method, "notifications/")
		if notification && s.isClosed() {
			return nil, nil
		}
		if !s.quiet.enter() {
			return nil, errServerClosed
		}
		defer s.quiet.exit()
		res, err := next(ctx, method, req)
		if err != nil && notification && s.isClosed() {
			return nil, nil // its session was closed under it
		}
		return res, err
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// cancelChangeNotifications cancels the list_changed notifications the
// SDK has scheduled. It has no call for it, but it cancels a scheduled
// notification when a change finds no session connected: so, once the
// sessions are closed, a placeholder tool, prompt and resource are added
// and removed again, which leaves every list as it was. The placeholders'
// names are random: they never clash with the application's.
func (s *Server) cancelChangeNotifications() {
	for range s.mcp.Sessions() {
		return // a session connected after Close: it may hear them
	}
	name := "agentsurface.closing." + randid.Text()
	s.mcp.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, errServerClosed })
	s.mcp.RemoveTools(name)
	s.mcp.AddPrompt(&mcp.Prompt{Name: name},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return nil, errServerClosed
		})
	s.mcp.RemovePrompts(name)
	uri := "agentsurface:closing/" + name
	s.mcp.AddResource(&mcp.Resource{Name: name, URI: uri},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, errServerClosed
		})
	s.mcp.RemoveResources(uri)
}
