package webhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// Views is one session's UI state, as the application keeps it: what its
// pages mount while they are shown, and the live fragments they render.
// [Options.NewViews] makes one per session. The Host calls its methods
// without holding any lock of its own, possibly from several goroutines
// at once (Fragment for several streams, while Mount runs), so a Views
// guards its state itself.
type Views interface {
	// Mount registers the components the session's pages show, with
	// s.Registry().RegisterContext(ctx, …), so that they unmount when ctx
	// ends: when the session's last page has been closed for
	// Options.PageGrace, or the session ends. The Host calls it when a
	// page is served or an event stream opens while nothing is mounted
	// (again after an unmount), and never twice at once for a session.
	// Navigation within a page (a panel opening) registers and
	// unregisters under the same ctx, which the views keep for that
	// purpose until it ends. An error is logged and leaves the session
	// unmounted until its next page.
	Mount(ctx context.Context, s *Session) error
	// Fragment writes the HTML of the live fragment whose element id is
	// id, for an event stream of a page that marked that element with
	// the data-fragment attribute. The Host asks for every fragment of
	// the page when its stream opens, then for those named by
	// [Session.Changed] since, at most every 100ms per stream, and sends
	// only those whose HTML changed. ctx is the stream's request
	// context. Return [ErrNoFragment] for an id it does not render; the
	// Host renders [ApprovalsID] itself.
	Fragment(ctx context.Context, w io.Writer, id string) error
}

// Listener is implemented by views that follow application-wide changes
// announced with [Host.Notify] (on this replica or another). Notified is
// called on a goroutine of the Host, one session after another, without
// locks held; ctx ends when the session ends. It typically re-reads what
// changed and calls [Session.Changed]. A topic of "" means anything may
// have changed (notifications from other replicas may have been lost).
type Listener interface {
	Notified(ctx context.Context, topic string)
}

// ErrNoFragment is what [Views.Fragment] returns for an id it does not
// render.
var ErrNoFragment = errors.New("webhost: no such fragment")

// Session is one browser session (or one made with [Host.NewSession]):
// its user, its registry, the application's views, its credentials and
// its pages. Its methods are safe for concurrent use.
type Session struct {
	h         *Host
	id        string       // public, for pages and logs; random, unrelated to the secrets
	keys      [3]secretKey // the SHA-256 of the cookie, the token and the join code, by credential (directory.go)
	token     string       // the MCP bearer token; "" when made from Credentials
	join      string       // the join code; "" when made from Credentials
	user      string
	created   time.Time
	reg       *surface.Registry
	now       func() time.Time  // the registry's clock
	audit     surface.AuditSink // the registry's audit sink, for the approve page's refusals; nil for none
	views     Views
	keepShown bool
	hosted    bool // made by Host.NewSession
	unused    bool // guarded by h.mu: made for a first page, not yet used (directory.go)

	mu     sync.Mutex
	closed bool
	ctx    context.Context    // made on first use (Context); Close cancels it
	cancel context.CancelFunc // ends ctx
	// want is whether the views should be mounted: a page was served
	// within PageGrace, a stream is open, or KeepShown. mounted is the
	// current mount, or nil; busy says a goroutine is reconciling the
	// two (reconcile), so that Mount never runs twice at once.
	want      bool
	busy      bool
	mounted   *mount
	webmcp    *webmcpTools // made on first use (tools)
	lastSeen  time.Time
	streams   map[*stream]struct{}
	seq       uint64      // numbers the streams, oldest first
	pageTimer *time.Timer // the grace of a page without a stream
	// Approvals (approvals.go). The maps (and streams) are made on first
	// use: most sessions never have an approval.
	known     map[string]surface.PendingConfirmation // requested and not resolved yet, by id
	deciding  map[string]decider                     // by id, while decide resolves it
	decisions []Decision                             // oldest first
	calls     map[string]CallOutcome                 // by confirmation id: the call that presented it
}

// mount is one mount of the views; cancel ends its context.
type mount struct{ cancel context.CancelFunc }

// init makes the session's registry and views: the application's code
// runs here, without locks.
func (s *Session) init() (err error) {
	h := s.h
	o := surface.Options{
		Context:     s.hostContext,
		Logger:      h.log,
		Limits:      surface.Limits{ConfirmationTTL: h.opts.ConfirmationTTL},
		OnDuplicate: surface.DuplicateReplace,
	}
	if h.opts.Registry != nil {
		h.opts.Registry(s, &o)
	}
	o.Telemetry = s.observe(o.Telemetry)
	s.now = o.Now
	if s.now == nil {
		s.now = time.Now
	}
	if h.opts.Replicas != nil {
		if shared := h.opts.Replicas.AuditSink(s.id); shared != nil {
			if o.Audit == nil {
				o.Audit = shared
			} else {
				o.Audit = teeAudit{o.Audit, shared}
			}
		}
	}
	s.audit = o.Audit
	s.reg = surface.New(&o)
	if h.opts.Executor != nil {
		s.reg.SetProcedureExecutor(h.opts.Executor)
	}
	s.reg.SubscribeTo(s.event, surface.SurfaceChanged{}, surface.AvailabilityChanged{}, surface.ComponentUnregistered{},
		surface.ConfirmationRequested{}, surface.ConfirmationResolved{})
	views, err := h.opts.NewViews(s)
	if err == nil && views == nil {
		err = errors.New("webhost: Options.NewViews returned no views")
	}
	if err != nil {
		s.discard()
		return err
	}
	s.views = views
	return nil
}

// discard drops a session that was never admitted.
func (s *Session) discard() {
	s.mu.Lock()
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	_ = s.reg.Close()
}

// ID returns the session's public id ("s_…"): random, unrelated to its
// credentials, for pages, logs and the audit trail.
func (s *Session) ID() string { return s.id }

// Token returns the session's MCP bearer token, which an agent presents
// to act on this session (Options.MCP). Show it to the session's user
// only; it ends with the session. It is "" for a session made from
// [Credentials]: the Host knows its token by its hash only.
func (s *Session) Token() string { return s.token }

// JoinPath returns the path of the link that binds a browser to this
// session (Options.Prefix + "join/…"); it works until the session ends.
// It is a credential: show it to the session's user only. It is "" for a
// session made from [Credentials].
func (s *Session) JoinPath() string {
	if s.join == "" {
		return ""
	}
	return s.h.opts.Prefix + "join/" + s.join
}

// Credentials are what a Host keeps of a session's secrets: their
// SHA-256, never the secrets, and its public id. An application that
// keeps them (in its database) can make the session again in a later
// run, with [SessionOptions].Credentials: the same MCP bearer token, join
// link and browser cookie then reach it, so that an agent configured with
// the token, a saved link and a page left open all work across restarts.
// They are not secrets (nobody can present a hash), but keep them where
// only the application writes: whoever can change them can choose a
// session's token.
type Credentials struct {
	// ID is the session's public id ([Session.ID]).
	ID string
	// Cookie, Token and Join are the SHA-256 of the browser cookie, the
	// MCP bearer token and the join code.
	Cookie, Token, Join [32]byte
}

// Credentials returns what the Host keeps of the session's secrets, for
// an application that makes the session again in a later run.
func (s *Session) Credentials() Credentials {
	return Credentials{ID: s.id, Cookie: s.keys[credCookie], Token: s.keys[credToken], Join: s.keys[credJoin]}
}

// replicaTokens names the session's credentials to the replicas'
// directory,
// and the route of its approve links (approve.go).
func (s *Session) replicaTokens() []string {
	out := make([]string, len(s.keys), len(s.keys)+1)
	for i, k := range s.keys {
		out[i] = replicaToken(k)
	}
	return append(out, replicaToken(keyOf(routeSecret(s.id))))
}

// User returns the session's user ([Options.User]), "" for an anonymous
// one.
func (s *Session) User() string { return s.user }

// Registry returns the session's registry.
func (s *Session) Registry() *surface.Registry { return s.reg }

// Views returns the session's views, as Options.NewViews made them.
func (s *Session) Views() Views { return s.views }

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.Context().Done() }

// tools returns the session's WebMCP tools, made on first use: most
// sessions never have a page with a model context.
func (s *Session) tools() *webmcpTools {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.webmcp == nil {
		s.webmcp = &webmcpTools{reg: s.reg, consumer: s.h.opts.WebMCP.Consumer, closed: s.closed}
	}
	return s.webmcp
}

// Context returns a context that ends when the session ends, for work
// the views start on their own.
func (s *Session) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil { // made on first use: an idle session holds none
		s.ctx, s.cancel = context.WithCancel(context.Background())
		if s.closed {
			s.cancel()
		}
	}
	return s.ctx
}

// Shown reports whether the views are mounted: a page shows the session,
// or it is kept shown.
func (s *Session) Shown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mounted != nil
}

// hostContext is the registry's default host context.
func (s *Session) hostContext() map[string]any {
	if s.user == "" {
		return map[string]any{"session": s.id}
	}
	return map[string]any{"session": s.id, "user": s.user}
}

// touch records activity, which keeps the session from expiring.
func (s *Session) touch() {
	s.mu.Lock()
	s.lastSeen = time.Now()
	s.mu.Unlock()
}

// pageState reports whether a page of the session is open, and when the
// session was last used.
func (s *Session) pageState() (open bool, lastSeen time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams) > 0, s.lastSeen
}

// idleAt reports whether the session has been idle for timeout at now:
// no open page and no request.
func (s *Session) idleAt(now time.Time, timeout time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams) == 0 && now.Sub(s.lastSeen) >= timeout
}

// Changed tells the session's open pages that the live fragments ids
// changed (every fragment when ids is empty): each event stream renders
// those of them its page shows, at most every 100ms, so a burst of
// changes costs one render. It never blocks, and may be called from
// anywhere, also from a capability's handler or a Views method.
func (s *Session) Changed(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		st.mark(ids)
	}
}

// toolsChanged tells the WebMCP streams to check the tools they offer.
func (s *Session) toolsChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		if st.webmcp {
			st.markTools()
		}
	}
}

// event follows the registry: surface changes reach the pages' WebMCP
// tools, unregistrations expire the approvals they made useless, and
// confirmations feed the approvals inbox.
func (s *Session) event(e surface.Event) {
	switch e := e.(type) {
	case surface.SurfaceChanged, surface.AvailabilityChanged:
		s.toolsChanged()
	case surface.ComponentUnregistered:
		s.unregistered(e.RegistrationID)
	case surface.ConfirmationRequested:
		s.requested(e.ConfirmationID)
	case surface.ConfirmationResolved:
		s.resolved(e.ConfirmationID, e.Outcome)
	}
}

// The page lifecycle. Views are mounted while a page shows the session:
// from the page being served (for PageGrace, until its event stream
// connects), while an event stream is open, and for PageGrace after the
// last one closed (a reload). KeepShown sessions stay mounted.

// pageServed is called when a page of the session is served.
func (s *Session) pageServed() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.lastSeen = time.Now()
	s.want = true
	if len(s.streams) == 0 {
		s.armPageTimerLocked()
	}
	s.mu.Unlock()
	s.reconcile()
}

// armPageTimerLocked (re)starts the grace of a page without a stream.
func (s *Session) armPageTimerLocked() {
	if s.keepShown {
		return
	}
	s.stopPageTimerLocked()
	s.h.wg.Add(1) // Close waits for the callback, or for the Stop that cancels it
	s.pageTimer = time.AfterFunc(s.h.opts.PageGrace, func() {
		defer s.h.wg.Done()
		s.pageTimeout()
	})
}

func (s *Session) stopPageTimerLocked() {
	if s.pageTimer != nil && s.pageTimer.Stop() {
		s.h.wg.Done() // the callback will not run
	}
	s.pageTimer = nil
}

// pageTimeout runs PageGrace after the page was served or its last
// stream closed: with no stream open, the views unmount.
func (s *Session) pageTimeout() {
	s.mu.Lock()
	s.pageTimer = nil
	if len(s.streams) == 0 && !s.keepShown {
		s.want = false
	}
	s.mu.Unlock()
	s.reconcile()
}

// reconcile mounts or unmounts the views until mounted matches want (and
// the session being open). One goroutine at a time does it; another that
// changes want meanwhile leaves the work to it. The views' code runs
// without locks held.
func (s *Session) reconcile() {
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		return
	}
	s.busy = true
	failed := false
	for {
		want := s.want && !s.closed
		switch {
		case !want && s.mounted != nil:
			m := s.mounted
			s.mounted = nil
			s.mu.Unlock()
			m.cancel() // the components registered with its context unregister
			s.h.stats.shown(-1)
			s.Changed()
			s.mu.Lock()
		case want && s.mounted == nil && !failed:
			// Not a child of s.ctx: a mount ends before the session's
			// context does (Close unmounts), and an idle session then
			// holds one context less in its parent's children.
			ctx, cancel := context.WithCancel(context.Background())
			m := &mount{cancel: cancel}
			s.mounted = m
			s.mu.Unlock()
			s.h.stats.shown(+1)
			err := s.callMount(ctx)
			s.mu.Lock()
			if err != nil {
				s.h.log.Error("webhost: the views did not mount", "session", s.id, "error", err)
				failed = true // until the next page
				if s.mounted == m {
					s.mounted = nil
					s.mu.Unlock()
					cancel()
					s.h.stats.shown(-1)
					s.mu.Lock()
				}
				continue
			}
			s.mu.Unlock()
			s.Changed()
			s.mu.Lock()
		default:
			s.busy = false
			s.mu.Unlock()
			return
		}
	}
}

// callMount calls Views.Mount, turning a panic into an error.
func (s *Session) callMount(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Mount panicked: %v", p)
		}
	}()
	return s.views.Mount(ctx, s)
}

// notified tells the views of a topic, unless the session has ended.
func (s *Session) notified(l Listener, topic string) {
	ctx := s.Context()
	if ctx.Err() != nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			s.h.log.Error("webhost: Notified panicked", "session", s.id, "topic", topic, "panic", fmt.Sprint(p))
		}
	}()
	l.Notified(ctx, topic)
}

// Close ends the session: its page streams ("ended"), its views' mount,
// its MCP sessions, WebMCP calls and tokens, then its registry (pending
// confirmations expire, calls in flight are cancelled). It is
// idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.stopPageTimerLocked()
	if s.cancel != nil {
		s.cancel() // Done is closed; the views' work ends
	}
	m, tools := s.mounted, s.webmcp
	s.mu.Unlock()
	s.h.forget(s)
	s.h.log.Debug("webhost: session ended", "session", s.id)
	if m != nil {
		m.cancel() // the mount's context ends now, even while another goroutine reconciles
	}
	s.reconcile()
	if tools != nil {
		tools.close() // its WebMCP calls waiting for approval return
	}
	if s.h.mcp != nil {
		s.h.mcp.Forget(s.reg) // its MCP sessions end
	}
	_ = s.reg.Close()
}
