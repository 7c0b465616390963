// Package webreplica runs a webhost application as one of several
// replicas behind a load balancer without stickiness, with Postgres as
// the shared store, through package replica: it implements
// [webhost.Replicas].
//
// The application makes one [Replicas] per process and passes it in
// webhost.Options.Replicas; nothing else changes. The Host starts it (the
// session directory's lease, the notification listener, the audit
// writer) in webhost.New and stops it in Close, after its sessions ended,
// in the order package replica needs. The callbacks package replica
// takes at construction (the lost lease, notifications) are wired here to
// the Host, so the application wires none:
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	// ...
//	rep, err := webreplica.New(pool, "http://"+podIP+":8080", secret, &webreplica.Options{
//		Channel:   "myapp",                       // Host.Notify reaches every replica
//		Audit:     &replica.AuditOptions{Replica: podName},
//		Migrate:   true,
//	})
//	// ...
//	h, err := webhost.New(webhost.Options{NewViews: newViews, Replicas: rep, AllowedHosts: []string{"app.example.com"}})
//	// ...
//	defer h.Close() // ends the sessions, then the listener, the directory (its sessions end for every replica), the audit writer
//
// What it does for the Host: every session's credentials (cookie, MCP
// bearer token, join code, which the Host names by their SHA-256) are
// claimed in the directory before they are handed out and released when
// the session ends; every request naming a
// session (by cookie, bearer token, join link) is forwarded to the
// replica that owns it, and one naming a session no live replica owns is
// answered where it landed, as an ended one; each session's audit
// records also go to agentsurface_audit, under its public id; a lost
// lease ends this replica's sessions; Host.Notify is broadcast with
// Postgres LISTEN/NOTIFY. Give every replica the same webhost.Options
// (AllowedHosts naming the load balancer's host in particular): a
// forwarded request keeps the client's Host header, and the owner checks
// it again.
package webreplica

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure [Replicas]; nil or zero fields take the defaults.
type Options struct {
	// Directory configures the session directory (replica.OpenDirectory):
	// its name, lease, timeout, logger, meter provider. Its OnLeaseLost
	// must be nil: the Host ends this replica's sessions.
	Directory replica.Options
	// Channel, if set, is the Postgres LISTEN/NOTIFY channel that carries
	// Host.Notify to the other replicas (replica.NewNotifier): lowercase
	// letters, digits and _. Empty: notifications stay on this replica.
	Channel string
	// Notifier configures the notifier (its Timeout and Logger);
	// notifications go to the Host.
	Notifier replica.NotifierOptions
	// Audit, if set, writes every session's audit records to the
	// deployment's audit table as well (replica.NewAuditSink).
	Audit *replica.AuditOptions
	// Forward configures forwarding (ResponseHeaderTimeout, MaxHopAge).
	// Its Ended, ErrorHandler and LongLived must be nil: the Host's.
	Forward replica.ForwardOptions
	// Migrate runs replica.Migrate when the Replicas start.
	Migrate bool
}

// Replicas implement [webhost.Replicas] with package replica. Make one
// with [New] and pass it to webhost.New, which starts it; the Host's
// Close closes it. Its methods are safe for concurrent use.
type Replicas struct {
	pool   *pgxpool.Pool
	addr   string
	secret []byte
	opts   Options

	mu       sync.Mutex
	dir      *replica.Directory
	notifier *replica.Notifier
	audit    *replica.AuditSink
	cluster  webhost.Cluster
	started  bool
	closed   bool
}

// New returns Replicas on pool, to pass in webhost.Options.Replicas:
// addr is the base URL at which the other replicas reach this one and
// secret the secret every replica shares (replica.OpenDirectory). It
// checks its arguments and does nothing else: the Host starts them.
func New(pool *pgxpool.Pool, addr string, secret []byte, opts *Options) (*Replicas, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case pool == nil:
		return nil, errors.New("webreplica: a pool is required")
	case o.Directory.OnLeaseLost != nil:
		return nil, errors.New("webreplica: Options.Directory.OnLeaseLost must be nil: the Host ends the sessions")
	case o.Forward.Ended != nil || o.Forward.ErrorHandler != nil || o.Forward.LongLived != nil:
		return nil, errors.New("webreplica: Options.Forward's Ended, ErrorHandler and LongLived are the Host's")
	}
	return &Replicas{pool: pool, addr: addr, secret: secret, opts: o}, nil
}

// Start implements [webhost.Replicas]: it registers this replica in the
// directory (running the migrations first with Options.Migrate), then
// listens for notifications and starts the audit writer.
func (r *Replicas) Start(ctx context.Context, c webhost.Cluster) (err error) {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("webreplica: Replicas serve one Host")
	}
	r.started, r.cluster = true, c
	r.mu.Unlock()
	if r.opts.Migrate {
		if err := replica.Migrate(ctx, r.pool); err != nil {
			return err
		}
	}
	do := r.opts.Directory
	do.OnLeaseLost = r.leaseLost
	dir, err := replica.OpenDirectory(ctx, r.pool, r.addr, r.secret, &do)
	if err != nil {
		return err
	}
	var notifier *replica.Notifier
	if r.opts.Channel != "" {
		no := r.opts.Notifier
		notified := func(n replica.Notification) { c.Notified(n.Payload) } // a Resync has an empty payload: anything changed
		if notifier, err = replica.NewNotifier(ctx, r.pool, r.opts.Channel, notified, &no); err != nil {
			_ = dir.Close()
			return err
		}
	}
	var audit *replica.AuditSink
	if r.opts.Audit != nil {
		audit = replica.NewAuditSink(r.pool, r.opts.Audit)
	}
	r.mu.Lock()
	r.dir, r.notifier, r.audit = dir, notifier, audit
	r.mu.Unlock()
	return nil
}

// leaseLost is the directory's OnLeaseLost: the Host ends this
// replica's sessions, which the other replicas count as ended already.
func (r *Replicas) leaseLost() {
	r.mu.Lock()
	c := r.cluster
	r.mu.Unlock()
	c.LeaseLost()
}

// directory returns the directory, or nil before Start.
func (r *Replicas) directory() *replica.Directory {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dir
}

// Claim implements [webhost.Replicas].
func (r *Replicas) Claim(ctx context.Context, tokens ...string) error {
	d := r.directory()
	if d == nil {
		return replica.ErrClosed
	}
	return d.Claim(ctx, tokens...)
}

// Release implements [webhost.Replicas].
func (r *Replicas) Release(tokens ...string) {
	if d := r.directory(); d != nil {
		d.Release(tokens...)
	}
}

// Forward implements [webhost.Replicas] with replica.Directory.Forward.
// It must be called after Start.
func (r *Replicas) Forward(next http.Handler, token func(*http.Request) string, longLived func(*http.Request) bool, failed func(http.ResponseWriter, *http.Request, error)) http.Handler {
	fo := r.opts.Forward
	fo.LongLived = longLived
	fo.ErrorHandler = func(w http.ResponseWriter, req *http.Request, err error) { failed(w, req, forwardError(err)) }
	// A request whose owner turned out to have left is answered here, as
	// for an ended session, but with the forwarding's context, which
	// replica cancelled when it forgot the owner: serve it with the
	// client's own context instead, so that the Host can make the page a
	// new session.
	fwd := r.directory().Forward(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if client, ok := req.Context().Value(clientCtxKey{}).(context.Context); ok && req.Context().Err() != nil && client.Err() == nil {
			req = req.WithContext(client)
		}
		next.ServeHTTP(w, req)
	}), token, &fo)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fwd.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), clientCtxKey{}, req.Context())))
	})
}

// clientCtxKey holds a request's context as the client's connection
// gave it, before forwarding.
type clientCtxKey struct{}

// forwardError turns an error of replica's forwarding into the Host's.
func forwardError(err error) *webhost.ForwardError {
	switch {
	case errors.Is(err, replica.ErrUnavailable), errors.Is(err, replica.ErrOwnerUnreachable), errors.Is(err, replica.ErrLeaseLost):
		return &webhost.ForwardError{Status: http.StatusServiceUnavailable, RetryAfter: time.Second, Err: err}
	case errors.Is(err, replica.ErrOwnerTimeout):
		return &webhost.ForwardError{Status: http.StatusGatewayTimeout, Err: err}
	case errors.Is(err, replica.ErrBadHop):
		return &webhost.ForwardError{Status: http.StatusForbidden, Err: err}
	}
	return &webhost.ForwardError{Status: http.StatusBadGateway, Err: err} // the owner failed or went
}

// AuditSink implements [webhost.Replicas]: the session's records go to
// the audit table under its public id, never blocking a call.
func (r *Replicas) AuditSink(session string) surface.AuditSink {
	r.mu.Lock()
	a := r.audit
	r.mu.Unlock()
	if a == nil {
		return nil
	}
	return a.For(session)
}

// Notify implements [webhost.Replicas].
func (r *Replicas) Notify(ctx context.Context, topic string) error {
	r.mu.Lock()
	n := r.notifier
	r.mu.Unlock()
	if n == nil {
		return nil
	}
	return n.Notify(ctx, topic)
}

// Ready implements [webhost.Replicas]: not ready before Start, after
// Close, while draining, and from a lost lease until the directory
// registered anew (replica.Directory.Ready).
func (r *Replicas) Ready() error {
	r.mu.Lock()
	d, closed := r.dir, r.closed
	r.mu.Unlock()
	switch {
	case closed:
		return replica.ErrClosed
	case d == nil:
		return errors.New("webreplica: not started")
	}
	return d.Ready()
}

// Drain tells the directory this replica is stopping: it claims no new
// session, and Ready fails (replica.Directory.Drain). webhost.Host.Drain
// calls it.
func (r *Replicas) Drain() {
	if d := r.directory(); d != nil {
		d.Drain()
	}
}

// Close implements [webhost.Replicas]: it stops the listener, leaves the
// directory (this replica's sessions end at once for every replica) and
// flushes the audit writer.
func (r *Replicas) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	d, n, a := r.dir, r.notifier, r.audit
	r.mu.Unlock()
	var errs []error
	if n != nil {
		errs = append(errs, n.Close())
	}
	if d != nil {
		errs = append(errs, d.Close())
	}
	if a != nil {
		errs = append(errs, a.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webreplica: close: %w", err)
	}
	return nil
}

// Directory returns the session directory once started, for its Stats
// and ID; nil before.
func (r *Replicas) Directory() *replica.Directory { return r.directory() }

// AuditStats returns the audit writer's counts (zero without
// Options.Audit).
func (r *Replicas) AuditStats() replica.AuditStats {
	r.mu.Lock()
	a := r.audit
	r.mu.Unlock()
	if a == nil {
		return replica.AuditStats{}
	}
	return a.Stats()
}

var _ webhost.Replicas = (*Replicas)(nil)
