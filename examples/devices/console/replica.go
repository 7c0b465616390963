package console

// Running the console on several replicas (package replica): the
// sessions' tokens are claimed in the session directory, requests are
// forwarded to the replica that owns their session, each session's audit
// also goes to Postgres, and domain writes are broadcast so that every
// replica's sessions follow.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
)

// NotifyChannel is the Postgres LISTEN/NOTIFY channel on which replicas
// of the console announce domain writes: give it to replica.NewNotifier.
const NotifyChannel = "agentsurface_devices"

// Replica connects an [App] to the other replicas of a deployment
// (Options.Replica). Set its fields, then pass it to [New]; it must not
// be copied after that. One Replica serves one App.
//
// The directory and the notifier take their callbacks when they are made,
// before the App exists: give them [Replica.LeaseLost] and
// [Replica.Notified], which do nothing until New has bound the App and
// then act on it, so that the wiring has no window in which a callback
// meets a half-made App:
//
//	rep := &console.Replica{}
//	dir, err := replica.OpenDirectory(ctx, pool, addr, secret,
//		&replica.Options{OnLeaseLost: rep.LeaseLost})
//	// ...
//	rep.Directory = dir
//	rep.Notifier, err = replica.NewNotifier(ctx, pool, console.NotifyChannel, rep.Notified, nil)
//	// ...
//	rep.Audit = replica.NewAuditSink(pool, &replica.AuditOptions{Replica: name, Durable: true})
//	app, err := console.New(console.Options{Store: store, Replica: rep})
//
// A callback that fires before New returns finds no session to end or
// refresh, which is what doing nothing means. Give every replica the same
// Options (AllowedHosts naming the load balancer's host in particular):
// a forwarded request keeps the client's Host header, and the owner
// checks it as the replica it landed on did. Stop in this order: the
// HTTP server (Shutdown), the App (Close: its sessions end and are
// released), the Notifier, the Directory (its sessions end at once for
// every replica), the AuditSink (it flushes).
type Replica struct {
	// Directory is the session directory. Every session's tokens (its
	// cookie, MCP bearer token and join code) are claimed in it before
	// they are handed out and released when the session ends, and the
	// App's handler forwards each request naming a session to the replica
	// that owns it. Required.
	Directory *replica.Directory
	// Audit, if set, receives every session's audit records as well as
	// the page's Activity card, under the session's public id (the
	// session column of agentsurface_audit). It never blocks a call:
	// what it cannot take it counts and logs (AuditSink.Stats).
	Audit *replica.AuditSink
	// Notifier, if set, carries domain writes to the other replicas: after
	// a procedure changes devices, the App refreshes its own sessions and
	// notifies, and the other replicas refresh theirs when their Notifier
	// calls [Replica.Notified]. It listens on [NotifyChannel]. Without it
	// a replica's sessions show another replica's writes at their next
	// read.
	Notifier *replica.Notifier

	mu  sync.Mutex
	app *App // bound by New
}

// bound returns the App New bound, or nil.
func (r *Replica) bound() *App {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.app
}

// LeaseLost is the directory's OnLeaseLost: it ends every session of the
// App ([App.EndSessions]), whose leases the other replicas now count as
// run out; their pages reconnect and get new sessions. Before [New] has
// bound the App it does nothing.
func (r *Replica) LeaseLost() {
	if a := r.bound(); a != nil {
		a.EndSessions()
	}
}

// Notified is the Notifier's OnNotify: another replica wrote to the
// domain (or notifications may have been missed, a Resync), so the App's
// sessions refresh ([App.DevicesChanged]). It returns at once. Before
// [New] has bound the App it does nothing.
func (r *Replica) Notified(replica.Notification) {
	if a := r.bound(); a != nil {
		a.DevicesChanged()
	}
}

// bind makes a the App of r.
func (r *Replica) bind(a *App) error {
	if r.Directory == nil {
		return errors.New("console: Options.Replica.Directory is required")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.app != nil {
		return errors.New("console: Options.Replica serves another App already")
	}
	r.app = a
	return nil
}

// ErrUnavailable: a new session's tokens could not be claimed in the
// session directory (Postgres unreachable, this replica's lease lost);
// trying again later may work. Visitors get 503 with Retry-After.
var ErrUnavailable = errors.New("console: the session directory cannot take a new session now")

// claim claims a new session's tokens in the directory, if there is one.
func (a *App) claim(ctx context.Context, tokens ...string) error {
	if a.rep == nil {
		return nil
	}
	if err := a.rep.Directory.Claim(ctx, tokens...); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// release releases an ended session's tokens.
func (a *App) release(s *Session) {
	if a.rep != nil {
		a.rep.Directory.Release(s.cookie, s.token, s.join)
	}
}

// sessionToken names the session a request is for, as the routes that
// serve it read it: the bearer token for /mcp, the join code for
// /join/{code}, the cookie for everything else but the static files.
func sessionToken(r *http.Request) string {
	switch p := r.URL.Path; {
	case p == "/mcp":
		t, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return strings.TrimSpace(t)
	case strings.HasPrefix(p, "/join/"):
		code := strings.TrimPrefix(p, "/join/")
		if strings.Contains(code, "/") {
			return ""
		}
		return code
	case strings.HasPrefix(p, "/static/"):
		return ""
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// forwardError answers a request that could not reach its session's
// replica. The page itself gets a page that tries again by itself;
// everything else the replica package's plain answer.
func (a *App) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	secure(w)
	if r.Method == http.MethodGet && r.URL.Path == "/" {
		status, after := http.StatusBadGateway, 2
		if errors.Is(err, replica.ErrUnavailable) || errors.Is(err, replica.ErrOwnerUnreachable) {
			status, after = http.StatusServiceUnavailable, 1
		}
		retryPage(w, status, after)
		return
	}
	replica.DefaultErrorHandler(w, r, err)
}

// retryPage answers a page request that cannot be served now with a page
// that loads itself again after seconds.
func retryPage(w http.ResponseWriter, status, seconds int) {
	w.Header().Set("Retry-After", strconv.Itoa(seconds))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = templates.ExecuteTemplate(w, "retry", seconds)
}

// DevicesChanged refreshes every session of this App after a change of
// the devices made elsewhere (another replica's write, as its Notifier
// reports it): their tables, selections and tools follow. It does not
// notify the other replicas, and returns at once. It is safe to call at
// any time, also after Close.
func (a *App) DevicesChanged() { a.refresh(false) }

// EndSessions ends every session of this App, as when it closes, but the
// App goes on serving: pages whose session ended reconnect and get a new
// one. It is what Replica.LeaseLost does, for a replica whose directory
// lease ran out. A session being made while it runs fails (ErrUnavailable)
// rather than outlive it.
func (a *App) EndSessions() {
	a.mu.Lock()
	a.epoch++
	a.mu.Unlock()
	for _, s := range a.all() {
		s.Close()
	}
}

// teeAudit records into the page's activity feed and the deployment's
// audit table.
type teeAudit struct {
	feed  *activity
	table surface.AuditSink
}

// Record implements surface.AuditSink. It never blocks; a record the
// table's sink drops is counted and logged there, and still shown.
func (t teeAudit) Record(ctx context.Context, e surface.AuditEvent) error {
	_ = t.feed.Record(ctx, e)
	_ = t.table.Record(ctx, e)
	return nil
}
