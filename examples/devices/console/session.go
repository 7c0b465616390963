package console

import (
	"context"
	"encoding/json"
	"html/template"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
)

// The console's users. The operator may disable and enable devices; the
// viewer may only look, and the domain service refuses the rest on its
// own, whatever the agent or the page allowed.
var (
	Operator = domain.User{ID: "olivia", Roles: []string{domain.RoleOperator}}
	Viewer   = domain.User{ID: "victor", Roles: []string{domain.RoleViewer}}
)

// users are the users the page offers.
var users = []domain.User{Operator, Viewer}

// Session is one browser session: its user, the state of its views, its
// registry (one per session, as one per browser tab in a web app), its
// MCP endpoint and its agent console. Its methods are safe for
// concurrent use.
type Session struct {
	app       *App
	id        string // public, for the page and logs; random, unrelated to the secrets
	cookie    string // the browser's secret
	token     string // the MCP bearer token
	join      string // the join code
	keepShown bool
	created   time.Time
	hosted    bool // made by App.NewSession
	unused    bool // guarded by app.mu: made for a first page, not yet used (sessions.go)
	reg       *surface.Registry
	activity  *activity
	console   *agentConsole
	webmcp    *webmcpTools  // the tools the page offers through WebMCP
	done      chan struct{} // closed by Close

	// mount serializes mounting and unmounting of the views' components;
	// it is held while calling Register and Unregister, never while
	// calling anything that could take it again.
	mount  sync.Mutex
	table  *surface.Handle
	detail *surface.Handle

	mu        sync.Mutex
	user      domain.User
	view      viewState
	shown     bool
	streams   int
	pageTimer *time.Timer
	lastSeen  time.Time
	subs      map[*pageStream]struct{}
	decisions []Decision
	runs      map[string]string        // confirmation id → the invocation that presented it
	rowCache  map[uint64]template.HTML // rendered Activity lines, by entry number
	seq       uint64                   // numbers the streams, oldest first
	closed    bool
}

// viewState is the state of the page's views, held on the server.
type viewState struct {
	filters   Filters
	sort      Sorting
	selection []string // device ids, in selection order
	detail    string   // the device whose detail panel is open, or ""
}

func newSession(a *App, o SessionOptions, cookie, token, join, id string) *Session {
	s := &Session{
		app: a, id: id, cookie: cookie, token: token, join: join, created: time.Now(),
		keepShown: o.KeepShown, done: make(chan struct{}),
		user: o.User, lastSeen: time.Now(), subs: map[*pageStream]struct{}{}, runs: map[string]string{},
		view: viewState{sort: Sorting{Column: "name", Direction: "asc"}},
	}
	s.activity = newActivity(200, s.audited)
	var audit surface.AuditSink = s.activity
	if a.rep != nil && a.rep.Audit != nil {
		audit = teeAudit{feed: s.activity, table: a.rep.Audit.For(id)}
	}
	s.reg = surface.New(&surface.Options{
		Context:   s.hostContext,
		Route:     s.route,
		Audit:     audit,
		Logger:    a.log,
		Limits:    surface.Limits{ConfirmationTTL: a.opts.ConfirmationTTL},
		Telemetry: a.opts.Telemetry,
		Policies:  a.opts.Policies,
	})
	s.reg.SetProcedureExecutor(a.exec)
	// The page follows the registry: its events and the changes of the
	// pending confirmations re-render the fragments they touch.
	s.reg.Subscribe(s.event)
	s.reg.Confirmations().Subscribe(func([]surface.PendingConfirmation) { s.changed(partApprovals) })
	s.console = newAgentConsole(s, a.opts.Agent, a.opts.AgentName)
	s.webmcp = &webmcpTools{reg: s.reg}
	return s
}

// ID returns the session's public id ("s_…"), shown on the page.
func (s *Session) ID() string { return s.id }

// Token returns the session's MCP bearer token.
func (s *Session) Token() string { return s.token }

// JoinPath returns the path ("/join/…") that binds a browser to this
// session; it works until the session ends.
func (s *Session) JoinPath() string { return "/join/" + s.join }

// Registry returns the session's registry.
func (s *Session) Registry() *surface.Registry { return s.reg }

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.done }

// User returns the acting user.
func (s *Session) User() domain.User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user
}

// SetUser switches the acting user; later calls run as u.
func (s *Session) SetUser(u domain.User) {
	s.mu.Lock()
	s.user = u
	s.mu.Unlock()
	s.changed(partAll &^ partConnect)
}

// hostContext is the registry's host context: who acts. Policies and the
// domain executor read it on every call.
func (s *Session) hostContext() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{"user": s.user, "session": s.id}
}

// route is where the page is, for snapshots.
func (s *Session) route() *surface.Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.view.detail != "" {
		return &surface.Route{Path: "/devices/" + s.view.detail, Params: map[string]string{"id": s.view.detail}}
	}
	return &surface.Route{Path: "/devices"}
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
	return s.streams > 0, s.lastSeen
}

// idleAt reports whether the session has been idle for timeout at now:
// no open page stream and no request.
func (s *Session) idleAt(now time.Time, timeout time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams == 0 && now.Sub(s.lastSeen) >= timeout
}

// changed tells every open page of the session to re-render the
// fragments of p. It never blocks: a stream that has a render pending
// needs no second signal.
func (s *Session) changed(p part) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ps := range s.subs {
		ps.dirty |= p
		select {
		case ps.signal <- struct{}{}:
		default:
		}
	}
}

// pageStream is one open event stream of the session's page.
type pageStream struct {
	s      *Session
	signal chan struct{} // a render is pending
	// evicted is closed when newer streams of the session pushed this one
	// out (Options.MaxStreams).
	evicted chan struct{}
	dirty   part // guarded by s.mu: the fragments to render
	seq     uint64
}

// take returns the fragments to render and clears them.
func (ps *pageStream) take() part {
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	p := ps.dirty
	ps.dirty = 0
	return p
}

// event follows the registry's events: the header and the Live surface
// follow the surface; the Activity card names a registration's component
// once its event tells it, and shows reads, which no audit record covers.
func (s *Session) event(e surface.Event) {
	switch e := e.(type) {
	case surface.SurfaceChanged:
		s.changed(partHeader | partSurface)
	case surface.AvailabilityChanged:
		s.changed(partSurface)
	case surface.ComponentRegistered:
		s.activity.label(e.RegistrationID, e.ComponentType+" "+e.InstanceID)
		s.changed(partActivity)
	case surface.ComponentUnregistered:
		s.activity.label(e.RegistrationID, e.ComponentType+" "+e.InstanceID)
		s.changed(partActivity)
	case surface.InvocationStarted:
		if isRead(e.CapabilityID) {
			s.activity.readStarted(e, consumerKey(e.ConsumerID))
		}
	case surface.InvocationSettled:
		if isRead(e.CapabilityID) {
			s.activity.readSettled(e)
			s.changed(partActivity)
		}
	}
}

// audited follows the audit records: the Activity card shows them, and
// the settlement of a call that presented an approval is the outcome of
// that decision.
func (s *Session) audited(e surface.AuditEvent) {
	p := partActivity
	if e.Type == surface.AuditInvocationSettled && e.InvocationID != "" {
		s.mu.Lock()
		for _, id := range s.runs {
			if id == e.InvocationID {
				p |= partApprovals
			}
		}
		s.mu.Unlock()
	}
	s.changed(p)
}

// reads are the observations of the page's components: reads, which the
// audit trail never records.
var reads = []string{"view:devices.table.readState", "view:devices.detail.readDevice"}

func isRead(capabilityID string) bool { return slices.Contains(reads, capabilityID) }

// consumerKey is the key (kind:id) of one of the console's consumers, by
// its id, as audit records name consumers.
func consumerKey(id string) string {
	for _, c := range []surface.Consumer{MCPConsumer, ConsoleConsumer, WebMCPConsumer} {
		if c.ID == id {
			return string(c.Kind) + ":" + c.ID
		}
	}
	return id
}

// The page lifecycle. A page is shown while an event stream is open, and
// for PageGrace after the last one closed (a reload) or after the page
// was served (until its stream connects). Sessions made with KeepShown
// stay shown. Showing mounts the views; closing unmounts them.

// pageServed is called when the page is rendered for a browser.
func (s *Session) pageServed() {
	s.touch()
	s.mountViews()
	s.mu.Lock()
	if s.streams == 0 {
		s.armPageTimerLocked()
	}
	s.mu.Unlock()
}

// streamOpened registers an event stream. Beyond Options.MaxStreams
// streams of the session the oldest is pushed out: each stream costs a
// render per change, so their number is bounded.
func (s *Session) streamOpened() (*pageStream, bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	s.seq++
	ps := &pageStream{s: s, signal: make(chan struct{}, 1), evicted: make(chan struct{}), seq: s.seq}
	if len(s.subs) >= s.app.opts.MaxStreams {
		var oldest *pageStream
		for x := range s.subs {
			if oldest == nil || x.seq < oldest.seq {
				oldest = x
			}
		}
		delete(s.subs, oldest)
		close(oldest.evicted)
	}
	s.subs[ps] = struct{}{}
	s.streams++
	s.lastSeen = time.Now()
	if s.pageTimer != nil {
		s.pageTimer.Stop()
		s.pageTimer = nil
	}
	s.mu.Unlock()
	s.mountViews()
	return ps, true
}

// streamClosed unregisters an event stream; the page counts as closed
// when no stream reopens within PageGrace.
func (s *Session) streamClosed(ps *pageStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, ps)
	s.streams--
	s.lastSeen = time.Now()
	if s.streams == 0 && !s.closed {
		s.armPageTimerLocked()
	}
}

func (s *Session) armPageTimerLocked() {
	if s.keepShown {
		return
	}
	if s.pageTimer != nil {
		s.pageTimer.Stop()
	}
	s.pageTimer = time.AfterFunc(s.app.opts.PageGrace, s.pageTimeout)
}

// pageTimeout runs PageGrace after the last stream closed.
func (s *Session) pageTimeout() {
	s.mu.Lock()
	closing := s.streams == 0 && !s.keepShown && !s.closed
	s.pageTimer = nil
	s.mu.Unlock()
	if closing {
		s.unmountViews()
	}
}

// Pending returns the confirmations waiting for the user.
func (s *Session) Pending() []surface.PendingConfirmation {
	return s.reg.Confirmations().Pending()
}

// Decision is a user's answer to a confirmation request, as the console
// recorded it: who decided what, on exactly which input.
type Decision struct {
	ConfirmationID string          `json:"confirmationId"`
	CapabilityID   string          `json:"capabilityId"`
	Consumer       string          `json:"consumer"`
	Summary        string          `json:"summary"`
	Input          json.RawMessage `json:"input"`
	Approved       bool            `json:"approved"`
	Actor          string          `json:"actor"`
	At             time.Time       `json:"at"`
	// InvocationID is the call that presented the approval, once one
	// ran: its settlement is the outcome.
	InvocationID string `json:"invocationId,omitempty"`
}

// Decide approves or denies the pending confirmation id on behalf of
// actor (recorded in the audit trail). It reports false when id is not
// pending (unknown, of another session, already decided or expired).
func (s *Session) Decide(id string, approve bool, actor string) (Decision, bool) {
	var p *surface.PendingConfirmation
	for _, pc := range s.reg.Confirmations().Pending() {
		if pc.ConfirmationID == id {
			p = &pc
			break
		}
	}
	if p == nil {
		return Decision{}, false
	}
	if !s.reg.Confirmations().Resolve(id, surface.Resolution{Approved: approve, Actor: actor}) {
		return Decision{}, false
	}
	d := Decision{
		ConfirmationID: id, CapabilityID: p.CapabilityID, Consumer: p.ConsumerKey, Summary: p.Summary,
		Input: json.RawMessage(p.Input), Approved: approve, Actor: actor, At: time.Now(),
	}
	s.mu.Lock()
	s.decisions = append(s.decisions, d)
	if len(s.decisions) > maxDecisions {
		s.decisions = slices.Delete(s.decisions, 0, len(s.decisions)-maxDecisions)
	}
	s.mu.Unlock()
	s.changed(partApprovals)
	return d, true
}

// Decisions returns the decisions taken in this session, oldest first.
func (s *Session) Decisions() []Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decisionsLocked()
}

func (s *Session) decisionsLocked() []Decision {
	out := slices.Clone(s.decisions)
	for i := range out {
		out[i].InvocationID = s.runs[out[i].ConfirmationID]
	}
	return out
}

// maxDecisions is how many decisions a session keeps.
const maxDecisions = 100

// AwaitDecision waits until confirmation id is no longer pending and
// reports how it ended.
func (s *Session) AwaitDecision(ctx context.Context, id string) surface.ConfirmationOutcome {
	return s.reg.Confirmations().Wait(ctx, id)
}

// Activity returns the session's audit records, newest first.
func (s *Session) Activity() []surface.AuditEvent { return s.activity.audit() }

// approvedRun records that invocation id executes with the approval of
// confirmation cid, so that the decision shows the call's outcome. (The
// call may start before Decide has recorded the decision.)
func (s *Session) approvedRun(cid, id string) {
	s.mu.Lock()
	if len(s.runs) >= 2*maxDecisions { // keep those of the decisions kept
		for k := range s.runs {
			if !slices.ContainsFunc(s.decisions, func(d Decision) bool { return d.ConfirmationID == k }) {
				delete(s.runs, k)
			}
		}
	}
	s.runs[cid] = id
	s.mu.Unlock()
	s.changed(partApprovals)
}

// Close ends the session: its page streams, agent run, MCP sessions and
// token, then its registry (pending confirmations expire, calls in flight
// are cancelled). It is idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.pageTimer != nil {
		s.pageTimer.Stop()
		s.pageTimer = nil
	}
	close(s.done)
	s.mu.Unlock()
	s.app.forget(s)
	s.console.close()
	s.webmcp.close()        // its WebMCP calls waiting for approval return
	s.app.mcp.Forget(s.reg) // its MCP sessions end
	_ = s.reg.Close()
}

// actorName is how a browser user appears in the audit trail.
func actorName(u domain.User, via string) string {
	return u.ID + " (" + strings.Join(u.Roles, ",") + ", " + via + ")"
}
