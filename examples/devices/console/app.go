package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/mcpsurface"
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
	// MaxSessions bounds the browser sessions held at once; beyond it new
	// visitors get 503. Default 10000.
	MaxSessions int
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
}

// App is the devices console: an http.Handler serving the page, its event
// streams, its form posts and the MCP endpoint /mcp, and the host API
// that tests and the CLI use ([App.NewSession], [Session.Decide]). Each
// browser session has its own registry. App is safe for concurrent use.
type App struct {
	opts  Options
	store *domain.Store
	log   *slog.Logger
	mux   *http.ServeMux
	exec  *executor
	mcp   *mcpsurface.HTTPHandler // serves /mcp
	// readState answers the table's readState; nil means
	// Session.tableState. The load test sets it to compare with an answer
	// from memory.
	readState func(context.Context, *Session) (TableState, error)

	mu       sync.Mutex
	byCookie map[string]*Session
	byToken  map[[32]byte]*Session
	byJoin   map[string]*Session
	byID     map[string]*Session
	closed   bool

	stop chan struct{}
	wg   sync.WaitGroup // the sweeper and broadcasts
}

// Errors of the host API.
var (
	// ErrClosed: the App or the session has been closed.
	ErrClosed = errors.New("console: closed")
	// ErrTooManySessions: Options.MaxSessions sessions are live.
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
	def(&opts.PageGrace, 5*time.Second)
	def(&opts.Heartbeat, 15*time.Second)
	def(&opts.WriteTimeout, 10*time.Second)
	def(&opts.MCPSessionTimeout, 10*time.Minute)
	def(&opts.ConfirmationTTL, 5*time.Minute)
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 10000
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
		opts: opts, store: opts.Store, log: opts.Logger,
		byCookie: map[string]*Session{}, byToken: map[[32]byte]*Session{}, byJoin: map[string]*Session{}, byID: map[string]*Session{},
		stop: make(chan struct{}),
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.exec = &executor{inner: domain.Procedures(opts.Store), app: a}
	a.mcp = a.newMCPHandler()
	a.mux = a.routes()
	a.wg.Go(a.sweeper)
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

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
// [Session.JoinPath] lets a browser join it.
func (a *App) NewSession(o SessionOptions) (*Session, error) {
	s, err := a.newSession(o)
	if err != nil {
		return nil, err
	}
	if o.KeepShown {
		s.mountViews()
	}
	return s, nil
}

func (a *App) newSession(o SessionOptions) (*Session, error) {
	if o.User.ID == "" {
		o.User = Operator
	}
	cookie, token, join := randomToken(), randomToken(), randomToken()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	if len(a.byCookie) >= a.opts.MaxSessions {
		return nil, ErrTooManySessions
	}
	s := newSession(a, o, cookie, token, join)
	a.byCookie[cookie] = s
	a.byToken[sha256.Sum256([]byte(token))] = s
	a.byJoin[join] = s
	a.byID[s.id] = s
	return s, nil
}

// Sessions returns the live sessions.
func (a *App) Sessions() []*Session { return a.all() }

// SessionCount returns how many sessions are live.
func (a *App) SessionCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byCookie)
}

// byBearer returns the session whose MCP token is token.
func (a *App) byBearer(token string) *Session {
	if token == "" {
		return nil
	}
	key := sha256.Sum256([]byte(token)) // no timing signal from the map's comparisons
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byToken[key]
}

func (a *App) bySessionCookie(r *http.Request) *Session {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byCookie[c.Value]
}

// activeSession returns the session of r's cookie, touched, or answers 401
// and returns nil when it has ended.
func (a *App) activeSession(w http.ResponseWriter, r *http.Request) *Session {
	s := a.bySessionCookie(r)
	if s == nil {
		http.Error(w, "This session has ended. Reload the page to start a new one.", http.StatusUnauthorized)
		return nil
	}
	s.touch()
	return s
}

func (a *App) byJoinCode(code string) *Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byJoin[code]
}

// forget removes an ended session from the indexes: its cookie, token
// and join code stop working at once.
func (a *App) forget(s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byCookie[s.cookie] == s {
		delete(a.byCookie, s.cookie)
	}
	if k := sha256.Sum256([]byte(s.token)); a.byToken[k] == s {
		delete(a.byToken, k)
	}
	if a.byJoin[s.join] == s {
		delete(a.byJoin, s.join)
	}
	if a.byID[s.id] == s {
		delete(a.byID, s.id)
	}
}

// all returns the live sessions.
func (a *App) all() []*Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*Session, 0, len(a.byCookie))
	for _, s := range a.byCookie {
		out = append(out, s)
	}
	return out
}

// sweeper ends idle sessions until Close.
func (a *App) sweeper() {
	every := min(a.opts.IdleTimeout/4, time.Minute)
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

// sweep ends the sessions idle at now.
func (a *App) sweep(now time.Time) {
	for _, s := range a.all() {
		if s.idleAt(now, a.opts.IdleTimeout) {
			a.log.Info("console: session expired", "session", s.id)
			s.Close()
		}
	}
}

// devicesChanged tells every session that the devices changed (a
// procedure mutated them), so their tables and selections follow.
func (a *App) devicesChanged() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
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

// byPublicID returns the session whose public id is id.
func (a *App) byPublicID(id string) *Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byID[id]
}

// randomToken returns 32 random bytes, base64url: unguessable.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
