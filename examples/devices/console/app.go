package console

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
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
	// IdleTimeout ends a session with no request and no open page for
	// this long: its registry, MCP sessions and token go. Default 30m.
	IdleTimeout time.Duration
	// PageGrace is how long a page may be without an open event stream
	// (a reload, a flaky network) before it counts as closed and its views
	// unmount. Default 5s.
	PageGrace time.Duration
	// Heartbeat is the interval of the event stream's keep-alive comments;
	// a stream whose heartbeat cannot be written within WriteTimeout ends.
	// Default 15s.
	Heartbeat time.Duration
	// WriteTimeout bounds every write to an event stream. Default 10s.
	WriteTimeout time.Duration
	// MaxSessions bounds the sessions in use at once. Beyond it a new one
	// takes the place of the session idle the longest that has no open
	// page (nor was made with NewSession); when every one has an open
	// page, new visitors get 503. Default 10000.
	MaxSessions int
	// MaxUnusedSessions bounds the sessions made for visitors' first
	// pages and not used yet (no event stream, form post, join link or
	// MCP request): beyond it the oldest unused one is reclaimed, so that
	// requests without a cookie, however many, take nothing from used
	// sessions and hold a bounded memory. Default 256.
	MaxUnusedSessions int
	// UnusedTimeout reclaims an unused session this long after its page
	// was served; the page's script uses it within milliseconds. Default
	// 1m.
	UnusedTimeout time.Duration
	// MaxStreams bounds the open event streams (tabs) of one browser
	// session; a newer one pushes the oldest out. Default 8.
	MaxStreams int
	// MaxMCPSessions bounds the MCP sessions of one browser session.
	// Default 8.
	MaxMCPSessions int
	// MCPSessionTimeout closes MCP sessions idle this long. Default 10m.
	MCPSessionTimeout time.Duration
	// MaxBodyBytes caps request bodies: MCP messages and form posts.
	// Default 1 MiB.
	MaxBodyBytes int64
	// ConfirmationTTL is how long an approval card waits for the user.
	// Default 5m.
	ConfirmationTTL time.Duration
	// AllowedHosts are the host names (or addresses) requests may name in
	// their Host header besides the loopback ones (localhost, *.localhost,
	// 127.0.0.0/8, ::1): those the server is reached by when it listens
	// beyond loopback. A request naming any other host is refused (421)
	// before anything is done, so that a web page whose domain resolves
	// to this server (DNS rebinding) reaches nothing. "*" allows every
	// host: only for a server behind a proxy that checks the host itself.
	AllowedHosts []string
	// ReadTimeout bounds the reading of a request body (a form post, an
	// MCP message), whatever the server's own timeouts. Default 30s.
	ReadTimeout time.Duration
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
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
	// TraceContext, if set, is the /mcp endpoint's
	// mcpsurface.Options.TraceContext: it continues the trace an MCP
	// client sends in a tool call's _meta (otelsurface's ExtractMeta).
	TraceContext func(ctx context.Context, meta map[string]any) context.Context
	// Replica, if set, makes the App one replica of several behind a load
	// balancer (see [Replica] and the package documentation): sessions are
	// claimed in its session directory, every request naming a session is
	// served by the replica that owns it, audit goes to Postgres too, and
	// domain writes reach the other replicas' sessions. Nil: a single
	// process, everything in memory.
	Replica *Replica
}

// App is the devices console: an http.Handler serving the page, its event
// streams, its form posts and the MCP endpoint /mcp, and the host API
// that tests and the CLI use ([App.NewSession], [Session.Decide]). Each
// browser session has its own registry. App is safe for concurrent use.
type App struct {
	opts    Options
	store   *domain.Store
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler // what ServeHTTP serves: the mux behind Guard (and forwarding)
	rep     *Replica     // Options.Replica
	exec    *executor
	mcp     *mcpsurface.HTTPHandler // serves /mcp
	// readState answers the table's readState; nil means
	// Session.tableState. The load test sets it to compare with an answer
	// from memory.
	readState func(context.Context, *Session) (TableState, error)

	mu     sync.Mutex
	dir    directory // the sessions (sessions.go)
	epoch  uint64    // counts EndSessions calls: a session claimed before one is not admitted after it
	closed bool

	stop chan struct{}
	wg   sync.WaitGroup // the sweeper and broadcasts
}

// Errors of the host API.
var (
	// ErrClosed: the App or the session has been closed.
	ErrClosed = errors.New("console: closed")
	// ErrTooManySessions: Options.MaxSessions sessions are in use, each
	// with an open page.
	ErrTooManySessions = errors.New("console: too many sessions")
)

// New returns a console serving opts.Store. Close it to end every session
// and stop its goroutines.
func New(opts Options) (*App, error) {
	if opts.Store == nil {
		return nil, errors.New("console: Options.Store is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.IdleTimeout, 30*time.Minute)
	def(&opts.UnusedTimeout, time.Minute)
	def(&opts.ReadTimeout, 30*time.Second)
	def(&opts.PageGrace, 5*time.Second)
	def(&opts.Heartbeat, 15*time.Second)
	def(&opts.WriteTimeout, 10*time.Second)
	def(&opts.MCPSessionTimeout, 10*time.Minute)
	def(&opts.ConfirmationTTL, 5*time.Minute)
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 10000
	}
	if opts.MaxUnusedSessions <= 0 {
		opts.MaxUnusedSessions = 256
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 8
	}
	if opts.MaxMCPSessions <= 0 {
		opts.MaxMCPSessions = 8
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.AgentName == "" {
		opts.AgentName = "scripted agent"
	}
	a := &App{
		opts: opts, store: opts.Store, log: opts.Logger, rep: opts.Replica,
		dir:  newDirectory(),
		stop: make(chan struct{}),
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.exec = &executor{inner: domain.Procedures(opts.Store, &domain.ProcedureOptions{Consumer: idempotencyScope}), app: a}
	a.mcp = a.newMCPHandler()
	a.mux = a.routes()
	if a.rep == nil {
		a.handler = a.Guard(a.mux)
	} else {
		// The Host check comes first, before anything is looked up or
		// forwarded; the owner checks it again and sets the answer's
		// headers, which the forwarding relays.
		a.handler = a.admit(a.rep.Directory.Forward(a.secured(a.mux), sessionToken, &replica.ForwardOptions{
			ErrorHandler: a.forwardError,
		}))
		if err := a.rep.bind(a); err != nil {
			_ = a.mcp.Close()
			return nil, err
		}
	}
	a.wg.Go(a.sweeper)
	return a, nil
}

// SessionOptions configure a session made with [App.NewSession].
type SessionOptions struct {
	// User is the acting user. Default the operator ([Operator]).
	User domain.User
	// KeepShown keeps the page's views mounted as if a page were open,
	// for sessions driven without a browser (the scripted demo, tests).
	// Without it, views mount when a page opens and unmount when it closes.
	KeepShown bool
}

// NewSession starts a session, as a browser's first visit does. Its
// [Session.JoinPath] lets a browser join it. With Options.Replica it
// fails with [ErrUnavailable] when the session directory cannot claim
// it.
func (a *App) NewSession(o SessionOptions) (*Session, error) {
	s, out, err := a.create(context.Background(), o, true)
	for _, x := range out {
		x.Close()
	}
	if err != nil {
		return nil, err
	}
	if o.KeepShown {
		s.mountViews()
	}
	return s, nil
}

// Sessions returns the live sessions.
func (a *App) Sessions() []*Session { return a.all() }

// SessionCount returns how many sessions are live, used or not.
func (a *App) SessionCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.dir.byID)
}

// activeSession returns the session of r's cookie, used, or answers 401
// and returns nil when it has ended.
func (a *App) activeSession(w http.ResponseWriter, r *http.Request) *Session {
	s, err := a.sessionOf(r, true)
	if err != nil {
		full(w)
		return nil
	}
	if s == nil {
		http.Error(w, "This session has ended. Reload the page to start a new one.", http.StatusUnauthorized)
		return nil
	}
	return s
}

// sweeper ends idle sessions until Close.
func (a *App) sweeper() {
	every := min(a.opts.IdleTimeout/4, a.opts.UnusedTimeout/4, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case now := <-t.C:
			a.sweep(now)
		}
	}
}

// devicesChanged tells every session that the devices changed (a
// procedure mutated them), so their tables and selections follow, and
// the other replicas, if any, so that theirs do.
func (a *App) devicesChanged() { a.refresh(true) }

// refresh refreshes every session in the background; with notify set it
// also tells the other replicas through Replica.Notifier.
func (a *App) refresh(notify bool) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		if notify && a.rep != nil && a.rep.Notifier != nil {
			// Bounded by the Notifier's Timeout. A write whose notification
			// is lost shows elsewhere at the next read.
			if err := a.rep.Notifier.Notify(context.Background(), "devices"); err != nil {
				a.log.Warn("console: cannot tell the other replicas that the devices changed", "error", err)
			}
		}
		for _, s := range a.all() {
			s.devicesChanged()
		}
	}()
}

// Close ends every session (their MCP sessions, event streams and agent
// runs) and stops the App's goroutines. It is idempotent.
func (a *App) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.stop)
	a.mu.Unlock()
	for _, s := range a.all() {
		s.Close()
	}
	_ = a.mcp.Close()
	a.wg.Wait()
	return nil
}

// executor is the domain's executor. A call that presents an approval
// tells its session, whose decision then shows the call's outcome; after
// a procedure that changes devices succeeds it tells the App.
type executor struct {
	inner surface.ProcedureExecutor
	app   *App
}

func (x *executor) Paths() []string { return x.inner.Paths() }

func (x *executor) Execute(ctx context.Context, call *surface.ProcedureCall) (json.RawMessage, error) {
	if call.Confirmation != nil {
		if id, _ := call.Host["session"].(string); id != "" {
			if s := x.app.byPublicID(id); s != nil {
				s.approvedRun(call.Confirmation.ID, call.InvocationID)
			}
		}
	}
	out, err := x.inner.Execute(ctx, call)
	if err == nil && call.Path != domain.ListPath {
		x.app.devicesChanged()
	}
	return out, err
}

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

// randomToken returns 52 random base32 characters (260 bits, as many as
// the 32 random bytes a token had): unguessable.
func randomToken() string { return randid.Text() + randid.Text() }
