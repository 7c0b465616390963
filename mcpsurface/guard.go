package mcpsurface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every tool call runs under guard: its context ends when the Server
// closes, when its session is closed through this package (DELETE), and,
// while the SDK waits for the client's answer to a confirmation
// elicitation, when the confirmation expires. The SDK's own session Close
// waits for in-flight calls without cancelling them, so without these
// bounds an unanswered elicitation would wedge every Close.

// attempt is what a tool call has learned about its invocation, for the
// result of a panic or an abandoned wait.
type attempt struct {
	invocationID string
	capabilityID string
}

// inflight is a tool call in progress.
type inflight struct {
	session string // the session id; empty for sessions without one
	cancel  context.CancelCauseFunc
	at      attempt // written only by the call's goroutine

	mu    sync.Mutex
	timer *time.Timer // ends an elicitation wait at the confirmation's expiry
	done  bool
	// The current round of the call: its request, what it carries from
	// the previous round, and the outcome its handler asked for.
	req *mcp.CallToolRequest
	in  input
	out *outcome
}

// Causes of a call's context ending.
var (
	errServerClosed  = errors.New("mcpsurface: server closed")
	errSessionClosed = errors.New("mcpsurface: session closed")
)

// expired is the cause of a call whose confirmation expired while the
// client was asked.
type expired struct{ confirmationID string }

func (e *expired) Error() string {
	return "mcpsurface: confirmation " + e.confirmationID + " expired unanswered"
}

type inflightKey struct{}

// guard wraps the SDK's handling of tools/call (including its
// elicitation round trip for older clients): it bounds the call's context,
// recovers panics and turns an abandoned wait into a result.
func (s *Server) guard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (result mcp.Result, err error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		reserveStack(0)
		var name string
		var args json.RawMessage
		var meta map[string]any
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
			name, args, meta = s.catalogName(req, p.Name), p.Arguments, p.Meta
		}
		ctx = s.traceContext(ctx, meta)
		f := &inflight{}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if ss != nil {
			f.session = ss.ID()
		}
		ctx, f.cancel = context.WithCancelCause(ctx)
		if err := s.calls.begin(f); err != nil {
			f.cancel(err)
			return toolResult(s.closedResult(f.at, err)), nil
		}
		defer s.calls.end(f)
		defer func() {
			if rec := recover(); rec != nil {
				result, err = toolResult(s.panicked(rec, name, args, &f.at)), nil
			}
		}()
		ctx = context.WithValue(ctx, inflightKey{}, f)
		if call, ok := req.(*mcp.CallToolRequest); ok && !s.meta() && s.shownOnly(req, name) {
			// A tool the client was shown but the list has dropped: the
			// SDK no longer knows it, the registry answers (stale or
			// unmounted) without asking the client anything.
			return s.callTool(withoutElicitation(ctx), call)
		}
		result, err = next(ctx, method, req)
		if err == nil {
			return result, nil
		}
		var exp *expired
		switch cause := context.Cause(ctx); {
		case errors.As(cause, &exp):
			return toolResult(s.expiredResult(f.at)), nil
		case errors.Is(cause, errServerClosed), errors.Is(cause, errSessionClosed):
			return toolResult(s.closedResult(f.at, cause)), nil
		}
		return result, err
	}
}

// traceContext applies Options.TraceContext; a panic there is logged and
// leaves ctx as it was.
func (s *Server) traceContext(ctx context.Context, meta map[string]any) (out context.Context) {
	if s.opts.TraceContext == nil {
		return ctx
	}
	defer func() {
		if rec := recover(); rec != nil {
			s.opts.Logger.Error("mcpsurface: TraceContext panicked", "panic", fmt.Sprint(rec))
			out = ctx
		}
	}()
	if c := s.opts.TraceContext(ctx, meta); c != nil {
		return c
	}
	return ctx
}

type noElicitKey struct{}

// withoutElicitation marks a call that must not be answered with an
// elicitation (it does not pass through the SDK's round trip).
func withoutElicitation(ctx context.Context) context.Context {
	return context.WithValue(ctx, noElicitKey{}, true)
}

// calls are the tool calls of a Server in progress, and the sessions
// being closed, whose calls are refused. It is safe for concurrent use.
type calls struct {
	mu       sync.Mutex
	closed   bool
	inflight map[*inflight]struct{}
	closing  map[string]int // sessions being closed: refuse their calls
}

// begin registers a call, unless the server or the call's session is
// closing.
func (c *calls) begin(f *inflight) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return errServerClosed
	case f.session != "" && c.closing[f.session] > 0:
		return errSessionClosed
	}
	if c.inflight == nil {
		c.inflight = map[*inflight]struct{}{}
	}
	c.inflight[f] = struct{}{}
	return nil
}

// end unregisters a finished call and releases its context and timer.
func (c *calls) end(f *inflight) {
	c.mu.Lock()
	delete(c.inflight, f)
	c.mu.Unlock()
	f.mu.Lock()
	f.done = true
	if f.timer != nil {
		f.timer.Stop()
	}
	// The registry may keep the call's context (and so f) a while, for
	// idempotent replays: let go of the request and its session.
	f.req, f.in, f.out = nil, input{}, nil
	f.mu.Unlock()
	f.cancel(nil)
}

// close refuses new calls and ends those in progress: their context ends
// with errServerClosed.
func (c *calls) close() {
	c.mu.Lock()
	c.closed = true
	running := make([]*inflight, 0, len(c.inflight))
	for f := range c.inflight {
		running = append(running, f)
	}
	c.mu.Unlock()
	for _, f := range running {
		f.cancel(errServerClosed)
	}
}

// closeSession ends the calls of a session that is being closed and
// refuses new ones until sessionClosed.
func (c *calls) closeSession(id string) {
	c.mu.Lock()
	if c.closing == nil {
		c.closing = map[string]int{}
	}
	c.closing[id]++
	var running []*inflight
	for f := range c.inflight {
		if f.session == id {
			running = append(running, f)
		}
	}
	c.mu.Unlock()
	for _, f := range running {
		f.cancel(errSessionClosed)
	}
}

// sessionClosed undoes closeSession's refusal once the session is gone.
func (c *calls) sessionClosed(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing[id]--; c.closing[id] <= 0 {
		delete(c.closing, id)
	}
	c.closing = orNil(c.closing)
}

// closeSession ends the calls of a session that is being closed and
// refuses new ones until sessionClosed.
func (s *Server) closeSession(id string) { s.calls.closeSession(id) }

// sessionClosed undoes closeSession's refusal once the session is gone.
// If ended is set, the session is gone: what this Server kept of it goes
// too (the SDK may still list it for a moment).
func (s *Server) sessionClosed(id string, ended bool) {
	s.calls.sessionClosed(id)
	if ended {
		s.pins.forgetSession(id)
	} else {
		s.pins.forgetEnded()
	}
}

// inflightFrom returns the call ctx belongs to, or nil outside guard.
func inflightFrom(ctx context.Context) *inflight {
	f, _ := ctx.Value(inflightKey{}).(*inflight)
	return f
}

// expireAt ends the call at the confirmation's expiry (if it is still
// running then), force-expiring the registry's record so that the answer
// can no longer approve it.
func (f *inflight) expireAt(s *Server, cid string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done || f.timer != nil {
		return
	}
	f.timer = time.AfterFunc(time.Until(at), func() {
		s.reg.Confirmations().Expire(cid)
		f.cancel(&expired{confirmationID: cid})
	})
}

// answered stops the expiry timer: the client answered, and the call
// goes on (executing, if approved) under its own time limits.
func (f *inflight) answered() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.timer != nil {
		f.timer.Stop()
	}
}

// expiredResult is the result of a call whose confirmation expired while
// the client was asked: the registry's CONFIRMATION_INVALID expired.
func (s *Server) expiredResult(at attempt) surface.Result {
	e := surface.NewReasonError(surface.CodeConfirmationInvalid, surface.ReasonExpired, "")
	return surface.Result{Status: surface.StatusError, InvocationID: firstNonEmpty(at.invocationID, s.newInvocationID()),
		CapabilityID: at.capabilityID, Error: e, SurfaceVersion: s.reg.Version()}
}

// closedResult is the result of a call cut short by a Close.
func (s *Server) closedResult(at attempt, cause error) surface.Result {
	msg := "The server was closed."
	if errors.Is(cause, errSessionClosed) {
		msg = "The session was closed."
	}
	e := surface.NewClosedError(msg)
	return surface.Result{Status: surface.StatusError, InvocationID: firstNonEmpty(at.invocationID, s.newInvocationID()),
		CapabilityID: at.capabilityID, Error: e, SurfaceVersion: s.reg.Version()}
}

// panicked logs a panic recovered from a tool call and returns the
// result the agent gets instead: EXECUTION_FAILED handler-error with the
// code's fixed message. The panic value and stack go to the log only.
func (s *Server) panicked(rec any, name string, args json.RawMessage, at *attempt) surface.Result {
	capID := at.capabilityID
	if capID == "" {
		if cat := s.list.catalog(); cat != nil {
			if t, ok := cat.Tool(name); ok {
				capID = t.CapabilityID
			}
		}
	}
	if capID == "" && s.meta() { // surface_read, surface_act: the capability asked for
		var in struct {
			CapabilityID string `json:"capabilityId"`
		}
		_ = json.Unmarshal(args, &in)
		capID = in.CapabilityID
	}
	capID = firstNonEmpty(capID, name)
	invID := firstNonEmpty(at.invocationID, s.newInvocationID())
	s.opts.Logger.Error("mcpsurface: a tool call panicked; answered EXECUTION_FAILED",
		"tool", name, "capabilityId", capID, "invocationId", invID,
		"panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
	return surface.Result{
		Status: surface.StatusError, InvocationID: invID, CapabilityID: capID,
		Error:          surface.NewReasonError(surface.CodeExecutionFailed, surface.ReasonHandlerError, ""),
		SurfaceVersion: s.reg.Version(),
	}
}

// callStack is how much stack reserveStack reserves: with the frames
// below guard, it grows the stack to 16 KiB, which holds a call through
// this package, the registry's pipeline and a small handler.
const callStack = 6 << 10

// reserveStack grows the goroutine's stack, if it must grow, at once,
// here, where few frames are below it. The SDK runs each request on a new
// goroutine whose stack starts small (the average of the program's
// goroutines); a call through the registry would otherwise grow it twice
// on its way down, copying and adjusting every frame below each time. i
// is 0; it keeps the compiler from dropping the array.
//
//go:noinline
func reserveStack(i int) byte {
	var pad [callStack]byte
	return pad[i%len(pad)]
}
