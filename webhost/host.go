package webhost

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
)

// Options configure a [Host]. Only NewViews is required; every other
// field's zero value means the default its comment names.
type Options struct {
	// NewViews makes the views of a new session: its UI state, which its
	// pages mount and render (see [Views]). It is called once per
	// session, when the session is made (a visitor's first page, or
	// [Host.NewSession]), outside every lock of the Host. An error fails
	// the request that made the session (500) or NewSession. Required.
	NewViews func(s *Session) (Views, error)
	// Registry, if set, configures each session's registry before it is
	// made: its policies, limits, telemetry, audit sink, host context.
	// o comes filled with the Host's defaults, which Registry may
	// change: Context returns {"session": s.ID()} plus {"user": s.User()}
	// when the session has a user (what surface.Authenticated reads);
	// Limits.ConfirmationTTL is ConfirmationTTL; Logger is Logger;
	// OnDuplicate is surface.DuplicateReplace, so that a page that opens
	// again while the components of its previous mount are still being
	// unregistered mounts them anew instead of being refused. It is called
	// outside every lock of the Host, for each session right before
	// NewViews and on the same goroutine (s.Registry() is nil until it
	// returns), so that views whose state the registry's options read
	// (an audit sink that feeds the page, a host context from the view's
	// user) can be made here and handed to NewViews.
	Registry func(s *Session, o *surface.Options)
	// Executor, if set, is the procedure executor of every session's
	// registry (surface.Registry.SetProcedureExecutor); it reads who
	// calls from surface.ProcedureCall.Host (the session's host
	// context).
	Executor surface.ProcedureExecutor
	// User, if set, names the signed-in user of a request, from the
	// application's own login (its session cookie, a header set by an
	// authenticating proxy): "" for a visitor who is not signed in. A
	// session belongs to the user of the request that made it; a request
	// of another user (another account in the same browser) does not
	// reach it: a page gets a session of its own, everything else 403.
	// An error refuses the request (401) before any session is looked up
	// or made. Nil means every browser session is its own anonymous user.
	// It is called on every request that names a session by its cookie,
	// outside every lock, so it should be a cheap lookup.
	User func(r *http.Request) (string, error)
	// AllowedHosts are the host names (or addresses) requests may name in
	// their Host header besides the loopback ones (localhost,
	// *.localhost, 127.0.0.0/8, ::1): those the application is reached by
	// beyond loopback. A request naming any other host is answered 421
	// before anything else is done, so that a page whose domain is made
	// to resolve to this server (DNS rebinding) reaches nothing, not even
	// a new session. "*" allows every host: only behind a proxy that
	// checks the host itself.
	AllowedHosts []string
	// Prefix is the path under which the Host serves its own routes: the
	// page script (Prefix+"page.js"), the event stream, approvals, join
	// links, WebMCP. Default "/agentsurface/". It must start and end
	// with "/".
	Prefix string
	// Home is where a join link and a plain (script-less) form post of
	// the Host land. Default "/".
	Home string
	// CookieName names the session cookie (HttpOnly, SameSite=Lax, Secure
	// over TLS). Default "agentsurface_session".
	CookieName string
	// MaxSessions bounds the sessions in use at once. Beyond it a new one
	// takes the place of the session idle the longest that has no open
	// page (nor was made with NewSession); when every one has an open
	// page, the request that would use one more is answered 503.
	// Default 10000.
	MaxSessions int
	// MaxUnusedSessions bounds the sessions made for visitors' first
	// pages and not used yet (no event stream, form post, join link or
	// MCP request): beyond it the oldest unused one is reclaimed, so
	// that requests without a cookie, however many, take nothing from
	// the sessions in use and hold a bounded memory. Default 256.
	MaxUnusedSessions int
	// UnusedTimeout reclaims an unused session this long after its page
	// was served; the page's script uses it within milliseconds.
	// Default 1m.
	UnusedTimeout time.Duration
	// IdleTimeout ends a session with no request and no open page for
	// this long: its registry, MCP sessions and tokens go. Default 30m.
	IdleTimeout time.Duration
	// PageGrace is how long a session's views stay mounted without an
	// open page: after the page was served (until its event stream
	// connects), and after its last event stream closed (a reload, a
	// flaky network). Default 5s.
	PageGrace time.Duration
	// MaxStreams bounds the open event streams (tabs) of one session; a
	// newer one pushes the oldest out, which is told so ("bye").
	// Default 8.
	MaxStreams int
	// Heartbeat is the interval of an event stream's keep-alive comments.
	// Default 15s.
	Heartbeat time.Duration
	// WriteTimeout bounds every write to an event stream (and the answer
	// of a WebMCP call that waited for an approval): a client that does
	// not read is cut. Default 10s.
	WriteTimeout time.Duration
	// ReadTimeout bounds the reading of a request body, whatever the
	// server's own timeouts. Default 30s.
	ReadTimeout time.Duration
	// MaxBodyBytes caps request bodies, the application's included: a
	// body declaring more is answered 413 before it is read, and reading
	// beyond it fails. Default 1 MiB.
	MaxBodyBytes int64
	// ConfirmationTTL is how long an approval waits for the user (the
	// registries' Limits.ConfirmationTTL unless Registry sets it).
	// Default 5m.
	ConfirmationTTL time.Duration
	// ContentSecurityPolicy is the Content-Security-Policy of every
	// answer. Default [DefaultContentSecurityPolicy]: scripts, styles and
	// connections of the page's own origin only, no framing. A handler of
	// the application may set its own on its answers.
	ContentSecurityPolicy string
	// RenderApprovals, if set, renders the approvals fragment
	// ([ApprovalsID]) instead of the Host's default card. It runs without
	// locks held; its form must post to [Host.DecidePath] as the default
	// card's does.
	RenderApprovals func(w io.Writer, s *Session, a Approvals) error
	// Actor names who decides an approval in the page or on the approve
	// page, for the audit trail and the decisions list. Default: the
	// session's user ("anonymous" without one) and how the decision was
	// reached: " (page)" (the approvals card, or the approve page opened
	// with the session's cookie), " (link)" (the approve link handed to
	// the agent), " (url)" (that link opened by URL-mode elicitation) or
	// " (webhook)" (the link the notifier sent).
	Actor func(r *http.Request, s *Session) string
	// RenderApprove, if set, renders the approve page ([Host.ApprovePath],
	// [Session.ApproveURL]) instead of the Host's default page: the
	// request and its form, the decision just taken, or a refusal. It
	// runs without locks held; the Host sets the status, the headers
	// (the Content-Security-Policy, no-store) and writes what it
	// rendered. Its form must post to ApprovePage.Action, with the field
	// "decision" ("approve", "deny" or "grant") and, for "grant",
	// "minutes" (one of GrantOffer.Minutes), as the default page's does.
	RenderApprove func(w io.Writer, p ApprovePage) error
	// PublicURL is the absolute URL at which users reach the application
	// ("https://app.example.com"), for the links the Host hands out to be
	// opened elsewhere: approve links ([Session.ApproveURL]) in a chat
	// message or an MCP client's URL-mode elicitation. Default "": those
	// links are paths, which a notifier that posts them must make
	// absolute itself; the links of the MCP endpoint are then under the
	// scheme and Host of each MCP request ([Host.ApproveURL]), which a
	// proxy that terminates TLS makes wrong (http): set PublicURL there.
	PublicURL string
	// Notifier tells the user about confirmation requests out of band
	// (a chat message with the approve link), for users who are not
	// looking at the application's page. Off unless its Notify is set.
	Notifier NotifierOptions
	// MCP configures the MCP endpoint.
	MCP MCPOptions
	// WebMCP configures the WebMCP endpoints.
	WebMCP WebMCPOptions
	// Replicas, if set, makes the Host one replica of several behind a
	// load balancer (package webreplica): sessions' tokens are claimed in
	// a shared directory, every request naming a session is served by the
	// replica that owns it, audit is shared, and [Host.Notify] reaches
	// the other replicas. New starts it; Close stops it, after the
	// sessions have ended. Nil: one process, everything in memory.
	Replicas Replicas
	// HealthPath and ReadyPath are where the Host answers liveness and
	// readiness probes (see [Host.Drain]). Defaults "/healthz" and
	// "/readyz".
	HealthPath, ReadyPath string
	// Logger receives diagnostics. Secrets (cookies, tokens, join codes)
	// are never logged; sessions appear by their public id. Default:
	// discard.
	Logger *slog.Logger
}

// MCPOptions configure the Host's MCP endpoint: one
// mcpsurface.HTTPHandler for every session, both protocol generations.
type MCPOptions struct {
	// Disabled serves no MCP endpoint.
	Disabled bool
	// Path is the endpoint's path. Default "/mcp".
	Path string
	// Consumer is who MCP clients act as, in policies, audit records and
	// approval cards. Default {ID: "agent", Kind: surface.ConsumerMCPBridge}.
	// With OAuth, ID is the verified user instead.
	Consumer surface.Consumer
	// HTTP configures the handler (mcpsurface.HTTPOptions): the server's
	// Implementation, TraceContext, Elicit, Extend and the rest. Its
	// defaults here: MaxSessions 8 per session, SessionTimeout 10m,
	// MaxRequestBodyBytes the Host's MaxBodyBytes, Logger the Host's.
	HTTP mcpsurface.HTTPOptions
	// OAuth, if set, requires an OAuth bearer token on every MCP request
	// instead of the session's own token (see [OAuthOptions]).
	OAuth *OAuthOptions
}

// WebMCPOptions configure the WebMCP endpoints, through which the page
// offers the session's tools to an agent in the user's own browser.
type WebMCPOptions struct {
	// Disabled serves no WebMCP endpoints; the page script then offers
	// nothing.
	Disabled bool
	// Consumer is who the browser's agent acts as. Default
	// {ID: "browser", Kind: surface.ConsumerWebMCP}.
	Consumer surface.Consumer
}

// DefaultContentSecurityPolicy allows a page only its own scripts,
// styles, connections, form targets and images (and data: images), and
// no framing: the Approve button cannot be clickjacked.
const DefaultContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"

// Errors of the Host's API.
var (
	// ErrClosed: the Host, or the session, has been closed.
	ErrClosed = errors.New("webhost: closed")
	// ErrTooManySessions: MaxSessions sessions are in use, each with an
	// open page.
	ErrTooManySessions = errors.New("webhost: too many sessions")
	// ErrUnavailable: the replicas' directory cannot take a new session
	// now (Options.Replicas); trying again later may work.
	ErrUnavailable = errors.New("webhost: the session directory cannot take a new session now")
)

// Host binds surface registries to web users: it keeps one session (one
// registry, the application's views) per browser, mounts the views while
// a page shows them, and serves the page script, event streams,
// approvals, MCP and WebMCP endpoints behind its guard. Make one with
// [New], serve [Host.Handler], and [Host.Close] it. A Host is safe for
// concurrent use; it calls the application's code (Options' funcs,
// [Views]) without holding any of its locks.
type Host struct {
	opts     Options
	log      *slog.Logger
	csp      string
	mcp      *mcpsurface.HTTPHandler // nil when MCP is disabled
	routes   *http.ServeMux          // the Host's own routes
	cluster  cluster
	stats    counters
	linkKey  []byte   // signs approve links (approve.go); random, this process's
	notifier notifier // Options.Notifier's calls (notifier.go)

	mu     sync.Mutex
	dir    directory // the sessions (directory.go)
	epoch  uint64    // counts endSessions calls: a session claimed before one is not admitted after it
	paired map[string]*Session
	// confirming maps the confirmation requests pending in the sessions
	// to their session, for Host.ApproveURL.
	confirming map[string]*Session
	draining   bool
	closed     bool

	stop chan struct{}
	wg   sync.WaitGroup // the sweeper, notifications, page timers
}

// New returns a Host. With Options.Replicas it starts them (which may
// take up to their timeouts) and fails if they cannot start. Close it to
// end every session and stop its goroutines.
func New(opts Options) (*Host, error) {
	if opts.NewViews == nil {
		return nil, errors.New("webhost: Options.NewViews is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.UnusedTimeout, time.Minute)
	def(&opts.IdleTimeout, 30*time.Minute)
	def(&opts.PageGrace, 5*time.Second)
	def(&opts.Heartbeat, 15*time.Second)
	def(&opts.WriteTimeout, 10*time.Second)
	def(&opts.ReadTimeout, 30*time.Second)
	def(&opts.ConfirmationTTL, 5*time.Minute)
	defInt(&opts.MaxSessions, 10000)
	defInt(&opts.MaxUnusedSessions, 256)
	defInt(&opts.MaxStreams, 8)
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Prefix == "" {
		opts.Prefix = "/agentsurface/"
	}
	if !strings.HasPrefix(opts.Prefix, "/") || !strings.HasSuffix(opts.Prefix, "/") || strings.ContainsAny(opts.Prefix, "{} ") {
		return nil, errors.New(`webhost: Options.Prefix must start and end with "/"`)
	}
	if opts.Home == "" {
		opts.Home = "/"
	}
	if opts.CookieName == "" {
		opts.CookieName = "agentsurface_session"
	}
	if opts.PublicURL != "" {
		u, err := url.Parse(opts.PublicURL)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, errors.New(`webhost: Options.PublicURL must be an absolute http(s) URL without query ("https://app.example.com")`)
		}
		opts.PublicURL = strings.TrimSuffix(opts.PublicURL, "/")
	}
	def(&opts.Notifier.Timeout, 10*time.Second)
	defInt(&opts.Notifier.MaxConcurrent, 4)
	if opts.HealthPath == "" {
		opts.HealthPath = "/healthz"
	}
	if opts.ReadyPath == "" {
		opts.ReadyPath = "/readyz"
	}
	if opts.MCP.Path == "" {
		opts.MCP.Path = "/mcp"
	}
	if opts.MCP.Consumer.ID == "" {
		opts.MCP.Consumer = surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
	}
	if opts.WebMCP.Consumer.ID == "" {
		opts.WebMCP.Consumer = surface.Consumer{ID: "browser", Kind: surface.ConsumerWebMCP}
	}
	if o := opts.MCP.OAuth; o != nil && !opts.MCP.Disabled {
		if o.Verify == nil {
			return nil, errors.New("webhost: Options.MCP.OAuth.Verify is required")
		}
		if opts.User == nil {
			return nil, errors.New("webhost: Options.MCP.OAuth needs Options.User: an agent acts on a session of its verified user")
		}
	}
	h := &Host{opts: opts, log: opts.Logger, csp: opts.ContentSecurityPolicy, dir: newDirectory(), stop: make(chan struct{}),
		linkKey: make([]byte, 32)}
	_, _ = rand.Read(h.linkKey)
	h.notifier.ctx, h.notifier.cancel = context.WithCancel(context.Background())
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.csp == "" {
		h.csp = DefaultContentSecurityPolicy
	}
	h.cluster = cluster{h}
	if !opts.MCP.Disabled {
		h.mcp = h.newMCPHandler()
	}
	h.routes = h.newRoutes()
	if opts.Replicas != nil {
		if err := opts.Replicas.Start(context.Background(), h.cluster); err != nil {
			if h.mcp != nil {
				_ = h.mcp.Close()
			}
			h.notifier.cancel()
			return nil, err
		}
	}
	h.wg.Go(h.sweeper)
	return h, nil
}

// SessionOptions configure a session made with [Host.NewSession].
type SessionOptions struct {
	// User is the session's user ([Options.User]); "" is anonymous.
	User string
	// KeepShown keeps the session's views mounted as if a page were
	// open, for sessions driven without a browser (tests, a scripted
	// demo). Without it they mount when a page opens and unmount when it
	// closes.
	KeepShown bool
	// Credentials, if set, makes the session under the credentials of a
	// session of an earlier run ([Session.Credentials]): its id, and the
	// token, join link and cookie that were handed out then. The session
	// is otherwise new (its registry, its views); its Token and JoinPath
	// are "", as the Host knows them by their hashes only. NewSession
	// fails with [ErrCredentialsInUse] while a live session has one of
	// them.
	Credentials *Credentials
}

// NewSession makes a session as a browser's first visit does, but in
// use at once (it is not reclaimed as unused) and never evicted to make
// room for another. Its [Session.JoinPath] lets a browser join it, its
// [Session.Token] an MCP client. With Options.Replicas it fails with
// [ErrUnavailable] when the directory cannot claim it.
func (h *Host) NewSession(o SessionOptions) (*Session, error) {
	return h.create(context.Background(), o.User, o.KeepShown, true, o.Credentials)
}

// Sessions returns the live sessions, used or not, in no order.
func (h *Host) Sessions() []*Session { return h.all() }

// Session returns the live session whose public id ([Session.ID]) is id,
// or nil.
func (h *Host) Session(id string) *Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dir.byID[id]
}

// Notify tells every session's views that topic changed (views that
// implement [Listener]), on this replica and, with Options.Replicas, on
// the others: for application writes that change what many sessions
// show, such as a domain record every page lists. It returns at once;
// the views are told on a goroutine of the Host, which Close waits for.
func (h *Host) Notify(topic string) { h.notify(topic, true) }

// notify tells the local sessions' views, and the other replicas when
// broadcast is set, in the background.
func (h *Host) notify(topic string, broadcast bool) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		if broadcast && h.opts.Replicas != nil {
			if err := h.opts.Replicas.Notify(context.Background(), topic); err != nil {
				h.log.Warn("webhost: cannot notify the other replicas", "topic", topic, "error", err)
			}
		}
		for _, s := range h.all() {
			if l, ok := s.views.(Listener); ok {
				s.notified(l, topic)
			}
		}
	}()
}

// Drain makes the readiness probe (Options.ReadyPath) fail from now on,
// so that a load balancer stops sending new requests here, while the Host
// goes on serving the ones it gets; Replicas that have a Drain method
// (webreplica's) stop claiming new sessions. Call it before Close when a
// replica stops.
func (h *Host) Drain() {
	h.mu.Lock()
	h.draining = true
	h.mu.Unlock()
	if d, ok := h.opts.Replicas.(interface{ Drain() }); ok {
		d.Drain() // Replicas that can also stop claiming new sessions
	}
}

// Close ends every session (their event streams say "ended", so that
// their pages reconnect, and their MCP sessions and tokens go), ends the
// context of the notifier's calls and waits for them at most
// Options.Notifier.Timeout (abandoning, with a log line, those that
// ignore it), stops the Host's goroutines and then its Replicas. Requests
// that arrive later are answered 503. It is idempotent.
//
// To stop a server: Drain, wait for the load balancer to notice, Close,
// then http.Server.Shutdown (which Close makes quick: the event streams
// have ended).
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	close(h.stop)
	h.mu.Unlock()
	for _, s := range h.all() {
		s.Close()
	}
	if h.mcp != nil {
		_ = h.mcp.Close()
	}
	h.closeNotifier()
	h.wg.Wait()
	if h.opts.Replicas != nil {
		return h.opts.Replicas.Close()
	}
	return nil
}

// isClosed reports whether Close has begun.
func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// sweeper ends idle and unused sessions until Close.
func (h *Host) sweeper() {
	every := min(h.opts.IdleTimeout/4, h.opts.UnusedTimeout/4, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			h.sweep(now)
		}
	}
}

// randomToken returns 32 random bytes, base64url: unguessable.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Session context.

type sessionKey struct{}

// SessionFrom returns the session a Host wrapper ([Host.Page],
// [Host.Action]) found for the request whose context is ctx, or nil.
func SessionFrom(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

func withSession(r *http.Request, s *Session) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
}
