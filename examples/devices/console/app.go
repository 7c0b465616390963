package console

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure an [App]. Only Store is required; zero fields take
// the documented defaults.
type Options struct {
	// Store is the devices domain service. Required. The App does not
	// close it.
	Store *domain.Store
	// Agent runs the page's embedded agent console. Default: the scripted
	// agent ([agent.Scripted]), which plays the demo task.
	Agent agent.Runner
	// AgentName names the embedded agent on the page ("scripted",
	// a model name). Default "scripted agent".
	AgentName string
	// Telemetry, if set, is the Telemetry of every session's registry,
	// e.g. an otelsurface.Instrumentation's, for traces and metrics of
	// every governed call.
	Telemetry *surface.Telemetry
	// Policies, if set, govern every session's registry, outermost in
	// every chain (surface.Options.Policies): for instance a policy that
	// hides the domain procedures from MCP clients. The page's Live
	// surface card explains, capability by capability, which policies
	// judged it and why it is hidden or unavailable.
	Policies []surface.Policy
	// Host configures what package webhost does for the console: the
	// sessions and their bounds, the page lifecycle, the MCP endpoint
	// (Host.MCP.HTTP: its TraceContext, its sessions), WebMCP, the guard
	// (Host.AllowedHosts, body and time limits), replicas
	// (Host.Replicas, package webreplica), probes and the logger; each
	// field's zero value is webhost's default. NewViews, Registry,
	// Executor, Actor and RenderApprovals are the console's and must be
	// nil; the MCP server's Implementation defaults to the console's.
	// Host.PublicURL, where users reach the console, makes the approve
	// links absolute under it (without it, an MCP client's links are
	// under the Host it connected to) and is the base of the MCP endpoint
	// the page prints.
	Host webhost.Options
}

// The consumers of a session: the page's embedded agent, MCP clients,
// and an agent in the user's browser.
var (
	// ConsoleConsumer is the consumer the page's embedded agent acts as.
	ConsoleConsumer = surface.Consumer{ID: "console", Kind: surface.ConsumerEmbedded}
	// MCPConsumer is the consumer MCP clients of a session act as
	// (webhost's default).
	MCPConsumer = surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
	// WebMCPConsumer is the consumer an agent in the user's browser acts
	// as when it calls the tools the page offers through WebMCP
	// (webhost's default). Its kind, surface.ConsumerWebMCP, keeps its
	// idempotency keys, confirmation evidence and limits apart from the
	// other consumers', shows on approval cards and in the audit trail as
	// webmcp:browser, and lets a policy treat it as the least trusted of
	// the session's consumers.
	WebMCPConsumer = surface.Consumer{ID: "browser", Kind: surface.ConsumerWebMCP}
)

// App is the devices console: an http.Handler serving the page, its form
// posts and static files beside what package webhost serves (the event
// streams, approvals, MCP and WebMCP endpoints, probes), and the host API
// that tests and the CLI use ([App.NewSession], [Session.Decide]). Each
// browser session has its own registry. App is safe for concurrent use.
type App struct {
	opts    Options
	log     *slog.Logger
	store   *domain.Store
	host    *webhost.Host
	mux     *http.ServeMux
	handler http.Handler // the mux behind the Host
	// readState answers the table's readState; nil means
	// Session.tableState. The load test sets it to compare with an answer
	// from memory.
	readState func(context.Context, *Session) (TableState, error)

	mu     sync.Mutex
	making map[*webhost.Session]*Session // made by the Registry hook, for NewViews
	closed bool
	runs   sync.WaitGroup // the embedded agents' runs (startRun)
}

// Errors of the host API.
var (
	// ErrClosed: the App or the session has been closed.
	ErrClosed = errors.New("console: closed")
)

// New returns a console serving opts.Store. Close it to end every session
// and stop its goroutines.
func New(opts Options) (*App, error) {
	if opts.Store == nil {
		return nil, errors.New("console: Options.Store is required")
	}
	ho := opts.Host
	if ho.NewViews != nil || ho.Registry != nil || ho.Executor != nil || ho.Actor != nil || ho.RenderApprovals != nil {
		return nil, errors.New("console: Options.Host's NewViews, Registry, Executor, Actor and RenderApprovals are the console's")
	}
	if opts.AgentName == "" {
		opts.AgentName = "scripted agent"
	}
	a := &App{opts: opts, log: opts.Host.Logger, store: opts.Store, making: map[*webhost.Session]*Session{}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	ho.Registry = a.configure
	ho.NewViews = a.views
	ho.Executor = &executor{inner: domain.Procedures(opts.Store, &domain.ProcedureOptions{Consumer: idempotencyScope}), app: a}
	ho.Actor = func(_ *http.Request, ws *webhost.Session) string { return actorName(viewsOf(ws).User(), "browser") }
	ho.RenderApprovals = a.renderApprovals
	if ho.MCP.Consumer.ID == "" {
		ho.MCP.Consumer = MCPConsumer
	}
	if ho.WebMCP.Consumer.ID == "" {
		ho.WebMCP.Consumer = WebMCPConsumer
	}
	if ho.MCP.HTTP.Implementation == nil {
		ho.MCP.HTTP.Implementation = &mcp.Implementation{Name: "agentsurface-devices", Title: "Devices console"} // Version: the module's
	}
	h, err := webhost.New(ho)
	if err != nil {
		return nil, err
	}
	a.host = h
	a.mux = a.routes()
	a.handler = h.Handler(a.mux)
	return a, nil
}

// configure is the Host's Registry hook: it makes the session's views,
// whose activity feed is the registry's audit sink and whose user and
// route are its host context, and hands them to NewViews.
func (a *App) configure(ws *webhost.Session, o *surface.Options) {
	s := newSession(a, ws)
	o.Context, o.Route, o.Audit = s.hostContext, s.route, s.activity
	o.Telemetry, o.Policies = a.opts.Telemetry, a.opts.Policies
	a.mu.Lock()
	a.making[ws] = s
	a.mu.Unlock()
}

// views is the Host's NewViews: the views configure made.
func (a *App) views(ws *webhost.Session) (webhost.Views, error) {
	a.mu.Lock()
	s := a.making[ws]
	delete(a.making, ws)
	a.mu.Unlock()
	if s == nil {
		return nil, errors.New("console: a session's views were not made")
	}
	s.start()
	return s, nil
}

// viewsOf returns the console's side of a session of the Host.
func viewsOf(ws *webhost.Session) *Session {
	s, _ := ws.Views().(*Session)
	return s
}

// ServeHTTP implements http.Handler: the console's routes and the Host's,
// behind the Host's guard (and, with Options.Host.Replicas, forwarding).
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// Handle serves handler at pattern (an http.ServeMux pattern) beside the
// console's routes, behind the same guard: for the demo's /metrics.
func (a *App) Handle(pattern string, handler http.Handler) { a.mux.Handle(pattern, handler) }

// Host returns the console's webhost.Host: its Stats, Drain, sessions.
func (a *App) Host() *webhost.Host { return a.host }

// SessionOptions configure a session made with [App.NewSession].
type SessionOptions struct {
	// User is the acting user. Default the operator ([Operator]).
	User domain.User
	// KeepShown keeps the page's views mounted as if a page were open,
	// for sessions driven without a browser (the scripted demo, tests).
	// Without it, views mount when a page opens and unmount when it closes.
	KeepShown bool
	// Credentials, if set, makes the session again under the credentials
	// of a session of an earlier run (webhost.SessionOptions.Credentials):
	// its token, join link and cookie work again, but are not known to
	// this run ([Session.Token] is "").
	Credentials *webhost.Credentials
}

// NewSession starts a session, as a browser's first visit does. Its
// [Session.JoinPath] lets a browser join it. With replicas it fails with
// webhost.ErrUnavailable when the session directory cannot claim it.
func (a *App) NewSession(o SessionOptions) (*Session, error) {
	ws, err := a.host.NewSession(webhost.SessionOptions{KeepShown: o.KeepShown, Credentials: o.Credentials})
	if err != nil {
		return nil, err
	}
	s := viewsOf(ws)
	s.mu.Lock()
	s.kept = o.KeepShown
	s.mu.Unlock()
	if o.User.ID != "" {
		s.SetUser(o.User)
	}
	return s, nil
}

// Sessions returns the live sessions, used or not.
func (a *App) Sessions() []*Session {
	var out []*Session
	for _, ws := range a.host.Sessions() {
		out = append(out, viewsOf(ws))
	}
	return out
}

// Session returns the live session whose public id is id, or nil.
func (a *App) Session(id string) *Session {
	if ws := a.host.Session(id); ws != nil {
		return viewsOf(ws)
	}
	return nil
}

// Close ends every session (their MCP sessions, event streams and agent
// runs) and stops the App's goroutines. It is idempotent.
func (a *App) Close() error {
	err := a.host.Close()
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.runs.Wait() // the runs end with their sessions
	return err
}

// startRun counts an embedded agent's run that is starting, which Close
// waits for; it reports false once Close has begun.
func (a *App) startRun() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.runs.Add(1)
	return true
}

// executor is the domain's executor: after a procedure that changes
// devices succeeds it tells every session, here and on the other
// replicas, so that their tables and selections follow.
type executor struct {
	inner surface.ProcedureExecutor
	app   *App
}

func (x *executor) Paths() []string { return x.inner.Paths() }

func (x *executor) Execute(ctx context.Context, call *surface.ProcedureCall) (json.RawMessage, error) {
	out, err := x.inner.Execute(ctx, call)
	if err == nil && call.Path != domain.ListPath {
		x.app.host.Notify(devicesTopic)
	}
	return out, err
}

// devicesTopic is the Host.Notify topic of a change of the devices.
const devicesTopic = "devices"

// idempotencyScope is the consumer a domain call's invocation id belongs
// to: the consumer key within its session. Every session has a registry
// of its own whose consumers are named alike (every session's MCP agent
// is "mcp-bridge:agent"), so the registry keeps their ids apart and so
// must the domain: agents of two sessions choose ids independently, and
// neither may be answered with, refused for or told of the other's use
// of one (AS-IDENT-004).
func idempotencyScope(call *surface.ProcedureCall) string {
	session, _ := call.Host["session"].(string)
	return "session " + session + " " + call.Consumer.Key()
}
