package webhost

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// Replicas connect a Host to the other replicas of a deployment that runs
// it several times behind a load balancer without stickiness. A session
// lives on the replica that made it (its owner); the Replicas claim its
// tokens in a directory the replicas share, forward every request naming
// it to its owner, share the audit trail and carry [Host.Notify] to the
// other replicas. Package webreplica implements it with package replica
// (Postgres); applications pass one in [Options.Replicas] and call none
// of its methods: the Host does, starting it in New and closing it in
// Close, after its sessions ended.
//
// The Host calls the methods concurrently, except Start (first, once) and
// Close (last, once).
type Replicas interface {
	// Start starts the replicas' machinery (the directory's lease, the
	// notification listener, the audit writer) before the Host serves.
	// It gives c the events of the other replicas for as long as it
	// runs. An error fails New.
	Start(ctx context.Context, c Cluster) error
	// Claim records that this replica owns the session of tokens, before
	// its credentials are handed out. The tokens name the session's
	// credentials (cookie, MCP bearer token, join code) by their SHA-256
	// in hex: the Replicas never see a credential. An error refuses the
	// new session (503).
	Claim(ctx context.Context, tokens ...string) error
	// Release records that the session of tokens has ended. It must not
	// block.
	Release(tokens ...string)
	// Forward returns next behind the forwarding: a request whose
	// session (token(r), named as in Claim; "" for none) another live
	// replica owns is served by that replica; the rest by next. A
	// forwarded request's answer is bounded in time unless longLived(r)
	// (a call that may wait for a person's approval). A request that
	// cannot be delivered is answered by failed with a [*ForwardError].
	Forward(next http.Handler, token func(r *http.Request) string, longLived func(r *http.Request) bool, failed func(w http.ResponseWriter, r *http.Request, err error)) http.Handler
	// AuditSink returns the sink of the session's audit records shared
	// by the replicas (session is its public id), or nil. It must not
	// block.
	AuditSink(session string) surface.AuditSink
	// Notify sends topic to the other replicas' Hosts (Cluster.Notified).
	Notify(ctx context.Context, topic string) error
	// Ready reports an error while this replica cannot serve new
	// sessions (its lease lost, its directory closed).
	Ready() error
	// Close stops the machinery, in the order it needs (the listener,
	// then the directory, then the audit writer, which flushes).
	Close() error
}

// Cluster is how Replicas tell their Host about the other replicas. Its
// methods return at once and may be called from any goroutine, at any
// time after Start began.
type Cluster interface {
	// LeaseLost ends every session of this replica: the other replicas
	// now count them as ended. Pages reconnect and get new sessions.
	LeaseLost()
	// Notified delivers another replica's Host.Notify topic to this
	// replica's views ([Listener]); "" after a gap in which notifications
	// may have been lost.
	Notified(topic string)
}

// cluster is the Host's side of Cluster.
type cluster struct{ h *Host }

func (c cluster) LeaseLost() {
	h := c.h
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.epoch++ // a session claimed before is not admitted after
	h.wg.Add(1)
	h.mu.Unlock()
	h.log.Error("webhost: this replica lost its lease; its sessions end")
	go func() { // LeaseLost returns at once; the sessions end meanwhile
		defer h.wg.Done()
		for _, s := range h.all() {
			s.Close()
		}
	}()
}

func (c cluster) Notified(topic string) { c.h.notify(topic, false) }

// ForwardError is what Replicas report (to Forward's failed) for a
// request they could not deliver to its session's owner.
type ForwardError struct {
	// Status is the HTTP status to answer: 503 when trying again may
	// work, 502 when the owner failed or stopped before answering, 504
	// when it did not answer in time, 403 for a forged forwarded request.
	Status int
	// RetryAfter, if positive, is when to try again.
	RetryAfter time.Duration
	// Err is the cause, for the log.
	Err error
}

func (e *ForwardError) Error() string {
	return fmt.Sprintf("webhost: the request could not be forwarded (%d): %v", e.Status, e.Err)
}

func (e *ForwardError) Unwrap() error { return e.Err }

// forwardFailed answers a request the replicas could not deliver: a page
// (a document a browser navigates to) gets a page that loads itself
// again; everything else a plain answer.
func (h *Host) forwardFailed(w http.ResponseWriter, r *http.Request, err error) {
	h.secure(w)
	status, after := http.StatusBadGateway, 0
	var fe *ForwardError
	if errors.As(err, &fe) {
		status, after = fe.Status, int((fe.RetryAfter+time.Second-1)/time.Second)
	}
	h.log.Warn("webhost: a request could not reach its session's replica", "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
	if status == http.StatusServiceUnavailable {
		h.stats.add(&h.stats.unavailable)
	}
	if r.Method == http.MethodGet && wantsDocument(r) {
		retryPage(w, status, max(after, 2))
		return
	}
	if after > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(after))
	}
	http.Error(w, http.StatusText(status), status)
}

// wantsDocument reports whether r is a browser's navigation to a page.
func wantsDocument(r *http.Request) bool {
	if d := r.Header.Get("Sec-Fetch-Dest"); d != "" {
		return d == "document"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// teeAudit records into the session's own sink and the replicas' shared
// one.
type teeAudit struct{ own, shared surface.AuditSink }

// Record implements surface.AuditSink; both sinks get every record.
func (t teeAudit) Record(ctx context.Context, e surface.AuditEvent) error {
	return errors.Join(t.own.Record(ctx, e), t.shared.Record(ctx, e))
}
