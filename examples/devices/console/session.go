package console

import (
	"context"
	"html/template"
	"slices"
	"strings"
	"sync"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
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

// Session is one browser session of the console: the state of its views
// (the devices table, the detail panel, the acting user), its activity
// feed and its agent console, over a session of package webhost, which
// holds its registry, credentials and pages. It is the webhost.Views of
// that session. Its methods are safe for concurrent use.
type Session struct {
	app      *App
	ws       *webhost.Session
	activity *activity

	// mount serializes mounting, navigation and unmounting of the views'
	// components; it is held while calling Register and Unregister,
	// never while calling anything that could take it again.
	mount    sync.Mutex
	mountCtx context.Context // the context of the current mount, or nil (unmounted)
	table    *surface.Handle
	detail   *surface.Handle

	mu       sync.Mutex
	user     domain.User
	kept     bool          // made with KeepShown
	console  *agentConsole // made on first use (agent)
	view     viewState
	rowCache map[uint64]template.HTML // rendered Activity lines, by entry number
}

// viewState is the state of the page's views, held on the server.
type viewState struct {
	filters   Filters
	sort      Sorting
	selection []string // device ids, in selection order
	detail    string   // the device whose detail panel is open, or ""
}

func newSession(a *App, ws *webhost.Session) *Session {
	s := &Session{app: a, ws: ws, user: Operator, view: viewState{sort: Sorting{Column: "name", Direction: "asc"}}}
	s.activity = newActivity(200, s.audited)
	return s
}

// agent returns the session's agent console, made on first use: most
// sessions never show it.
func (s *Session) agent() *agentConsole {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.console == nil {
		s.console = newAgentConsole(s, s.app.opts.Agent, s.app.opts.AgentName)
	}
	return s.console
}

// start follows the registry once it exists: its events re-render the
// fragments they touch, and its grants the Grants card.
func (s *Session) start() {
	s.ws.Registry().Subscribe(s.event)
	s.ws.Registry().Grants().Subscribe(s.grantsChanged)
}

// ID returns the session's public id ("s_…"), shown on the page.
func (s *Session) ID() string { return s.ws.ID() }

// Token returns the session's MCP bearer token; "" for a session made
// again from its Credentials, whose token this run knows by its hash.
func (s *Session) Token() string { return s.ws.Token() }

// JoinPath returns the path ("/agentsurface/join/…") that binds a
// browser to this session; it works until the session ends. It is "" for
// a session made again from its Credentials.
func (s *Session) JoinPath() string { return s.ws.JoinPath() }

// Credentials returns what the console keeps of the session's secrets
// (their hashes), to make it again in a later run.
func (s *Session) Credentials() webhost.Credentials { return s.ws.Credentials() }

// Registry returns the session's registry.
func (s *Session) Registry() *surface.Registry { return s.ws.Registry() }

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.ws.Done() }

// Close ends the session: its page streams, agent run, MCP sessions and
// token, then its registry (pending confirmations expire, calls in flight
// are cancelled). It is idempotent.
func (s *Session) Close() { s.ws.Close() }

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
	s.changed(partAll)
}

// keepShown reports whether the session was made with KeepShown.
func (s *Session) keepShown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept
}

// hostContext is the registry's host context: who acts. Policies and the
// domain executor read it on every call.
func (s *Session) hostContext() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{"user": s.user, "session": s.ws.ID()}
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

// changed tells the session's open pages to re-render the fragments of
// p. It never blocks.
func (s *Session) changed(p part) {
	var ids []string
	for _, f := range fragments {
		if p&f.part != 0 {
			ids = append(ids, f.id)
		}
	}
	s.ws.Changed(ids...)
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
		if isRead(e.CapabilityID) && s.activity.readSettled(e) {
			s.changed(partActivity)
		}
	}
}

// audited follows the audit records: the Activity card shows them.
func (s *Session) audited(surface.AuditEvent) { s.changed(partActivity) }

// reads are the observations of the page's components: reads, which the
// audit trail records only when they fail before reaching the component.
var reads = []string{"view:devices.table.readState", "view:devices.detail.readDevice"}

func isRead(capabilityID string) bool { return slices.Contains(reads, capabilityID) }

// consumerKey is the key (kind:id) of one of the console's consumers, by
// its id, as audit records name consumers.
func consumerKey(id string) string {
	for _, c := range []surface.Consumer{MCPConsumer, ConsoleConsumer, WebMCPConsumer} {
		if c.ID == id {
			return c.Key()
		}
	}
	return id
}

// Pending returns the confirmations waiting for the user.
func (s *Session) Pending() []surface.PendingConfirmation { return s.ws.Pending() }

// Decision is what became of a confirmation request of the session (see
// webhost.Decision): who decided what, on exactly which input, and what
// became of the call the approval let through.
type Decision = webhost.Decision

// Decide approves or denies the pending confirmation id on behalf of
// actor (recorded in the audit trail). It reports false when id is not
// pending in this session (unknown, of another session, already decided
// or expired).
func (s *Session) Decide(id string, approve bool, actor string) (Decision, bool) {
	return s.ws.Decide(id, approve, actor)
}

// Decisions returns the decisions of this session, oldest first, each
// with what became of the call its approval let through.
func (s *Session) Decisions() []Decision { return s.ws.Decisions() }

// AwaitDecision waits until confirmation id is no longer pending and
// reports how it ended.
func (s *Session) AwaitDecision(ctx context.Context, id string) surface.ConfirmationOutcome {
	return s.Registry().Confirmations().Wait(ctx, id)
}

// Activity returns the session's audit records, newest first.
func (s *Session) Activity() []surface.AuditEvent { return s.activity.audit() }

// actorName is how a browser user appears in the audit trail.
func actorName(u domain.User, via string) string {
	return u.ID + " (" + strings.Join(u.Roles, ",") + ", " + via + ")"
}
