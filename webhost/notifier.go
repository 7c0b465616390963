package webhost

// The notifier: Options.Notifier.Notify called for every confirmation
// request of a session, out of band, so that a user who is not looking
// at the application's page hears of it (a chat message with the approve
// link). It is bounded in every way a call of the application's code
// can misbehave: in time (a deadline), in number (at most MaxConcurrent
// at once; beyond, a request is not notified), in effect (a panic is
// recovered), and at Close (waited for at most Timeout, then abandoned).

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// NotifyFunc tells the user of session s about the confirmation request
// p, out of band: a chat message, a push notification, an e-mail, with
// approveURL, the approve link of p (a path unless Options.PublicURL is
// set; "" when p was decided before the call). Unlike the link an agent
// is handed ([Session.ApproveURL]), this one opens in any browser, on
// any device (with Options.User, for the session's user signed in), and
// its decision is recorded with channel surface.ChannelWebhook: send it
// to the user only, never to the agent. It must not approve anything
// itself: the link opens the approve page, where the user decides. ctx
// ends at the notifier's Timeout, when the session ends, and at Close. An
// error is logged at warn.
type NotifyFunc func(ctx context.Context, s *Session, p surface.PendingConfirmation, approveURL string) error

// NotifierOptions configure the Host's notifier (Options.Notifier).
type NotifierOptions struct {
	// Notify, if set, is called for every confirmation request of every
	// session of this replica, once, on a goroutine of its own, never
	// holding a lock of the Host: a call that needs approval, a page, the
	// event stream never wait for it. [SlackWebhook] is one. Nil: no
	// notifier.
	Notify NotifyFunc
	// Timeout bounds each call: its context ends then. Close waits at
	// most this long for the calls still running, then abandons them
	// (and logs so). Default 10s.
	Timeout time.Duration
	// MaxConcurrent bounds the calls running at once; a request that
	// comes while as many run (a notifier that hangs past its deadline
	// holds its place until it returns) is not notified, which is logged
	// at warn and counted ([Stats].NotifyDropped): the approvals card
	// and the agent's link still show it. Default 4.
	MaxConcurrent int
}

// notifier is the Host's bookkeeping of the calls of Notify.
type notifier struct {
	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	mu      sync.Mutex
	running int
	closed  bool
	idle    chan struct{} // made by Close while calls run; closed by the last one
}

// notifyConfirmation calls Options.Notifier.Notify for the request p of
// s in the background, unless MaxConcurrent calls run (or the Host is
// closing). It never blocks.
func (h *Host) notifyConfirmation(s *Session, p surface.PendingConfirmation) {
	notify := h.opts.Notifier.Notify
	if notify == nil {
		return
	}
	n := &h.notifier
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	if n.running >= h.opts.Notifier.MaxConcurrent {
		n.mu.Unlock()
		h.stats.add(&h.stats.notifyDropped)
		h.log.Warn("webhost: confirmation request not notified: as many notifications as Options.Notifier.MaxConcurrent are running",
			"session", s.id, "confirmation", p.ConfirmationID)
		return
	}
	n.running++
	n.mu.Unlock()
	go func() {
		defer n.done()
		ctx, cancel := context.WithTimeout(n.ctx, h.opts.Notifier.Timeout)
		defer cancel()
		stop := context.AfterFunc(s.Context(), cancel) // the session ended: nothing is left to approve
		defer stop()
		if err := h.callNotify(ctx, notify, s, p); err != nil {
			h.stats.add(&h.stats.notifyFailed)
			h.log.Warn("webhost: the notifier failed", "session", s.id, "confirmation", p.ConfirmationID, "error", err)
		}
	}()
}

// callNotify calls notify, turning a panic into an error.
func (h *Host) callNotify(ctx context.Context, notify NotifyFunc, s *Session, p surface.PendingConfirmation) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the notifier panicked: %v", r)
		}
	}()
	return notify(ctx, s, p, s.approveURL(p, linkNotified, s.h.opts.PublicURL))
}

// done records the end of a call.
func (n *notifier) done() {
	n.mu.Lock()
	n.running--
	if n.running == 0 && n.idle != nil {
		close(n.idle)
		n.idle = nil
	}
	n.mu.Unlock()
}

// closeNotifier refuses new calls, ends the context of those running and
// waits for them for at most Options.Notifier.Timeout; those still
// running then are abandoned, and logged.
func (h *Host) closeNotifier() {
	n := &h.notifier
	n.mu.Lock()
	n.closed = true
	var idle chan struct{}
	if n.running > 0 {
		idle = make(chan struct{})
		n.idle = idle
	}
	n.mu.Unlock()
	n.cancel()
	if idle == nil {
		return
	}
	t := time.NewTimer(h.opts.Notifier.Timeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		n.mu.Lock()
		running := n.running
		n.mu.Unlock()
		h.log.Error("webhost: Close abandons notifier calls that ignore their context", "running", running, "waited", h.opts.Notifier.Timeout)
	}
}
