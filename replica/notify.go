package replica

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Notification is a message a [Notifier] received from another replica.
type Notification struct {
	// Payload is what the other replica passed to Notify.
	Payload string
	// Resync, set with an empty Payload, says that notifications may have
	// been missed: the connection to Postgres broke and was made again.
	// Refresh whatever the notifications keep up to date.
	Resync bool
}

// NotifierOptions configure a [Notifier]. Nil, like every zero field,
// means the documented defaults.
type NotifierOptions struct {
	// Timeout bounds connecting, LISTEN and each Notify. Default 2s.
	Timeout time.Duration
	// Logger receives diagnostics. Default: discard.
	Logger *slog.Logger
}

// Notifier broadcasts small messages to every replica through Postgres
// LISTEN/NOTIFY, for changes that no HTTP request carries to the replicas
// concerned: a domain write on one replica that the sessions on all of
// them must show. It holds one connection of its own (outside the pool's
// count, made from its configuration) while it listens, and makes it
// again when it breaks. It is safe for concurrent use.
type Notifier struct {
	pool    *pgxpool.Pool
	channel string
	id      string // marks this Notifier's own notifications, which it skips
	notify  func(Notification)
	opts    NotifierOptions
	log     *slog.Logger
	cancel  context.CancelFunc
	done    chan struct{}

	mu     sync.Mutex
	closed bool
}

var channelName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// maxPayload is Postgres's limit on a NOTIFY payload, less the sender id.
const maxPayload = 7900

// NewNotifier listens on channel (lowercase letters, digits and _, at
// most 63) and returns once it listens, or the error why it cannot.
// onNotify receives every notification other replicas send on the
// channel, in order, on the Notifier's goroutine (one at a time), and a
// Resync after every reconnection; it should return quickly: the next
// notification waits for it. opts may be nil.
//
// A notification travels as "<sender> <payload>", the sender being the
// Notifier's random id (26 characters of base32, A–Z and 2–7), by which
// it skips its own.
func NewNotifier(ctx context.Context, pool *pgxpool.Pool, channel string, onNotify func(Notification), opts *NotifierOptions) (*Notifier, error) {
	if !channelName.MatchString(channel) {
		return nil, fmt.Errorf("replica: invalid channel name %q", channel)
	}
	if onNotify == nil {
		return nil, errors.New("replica: NewNotifier needs an onNotify function")
	}
	var o NotifierOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	n := &Notifier{pool: pool, channel: channel, id: rand.Text(), notify: onNotify, opts: o, log: o.Logger,
		done: make(chan struct{})}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	conn, err := n.listen(ctx)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go n.run(runCtx, conn)
	return n, nil
}

// listen opens the listening connection.
func (n *Notifier) listen(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, n.opts.Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, n.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("replica: listen on %s: %w", n.channel, err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("replica: listen on %s: %w", n.channel, err)
	}
	return conn, nil
}

// run delivers notifications until Close, reconnecting when the
// connection breaks.
func (n *Notifier) run(ctx context.Context, conn *pgx.Conn) {
	defer close(n.done)
	backoff := minBackoff
	for {
		if conn == nil {
			var err error
			if conn, err = n.listen(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				n.log.Warn("replica: cannot listen for notifications; retrying", "channel", n.channel, "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			backoff = minBackoff
			n.log.Info("replica: listening for notifications again", "channel", n.channel)
			n.notify(Notification{Resync: true})
		}
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			conn.Close(context.Background())
			conn = nil
			if ctx.Err() != nil {
				return
			}
			n.log.Warn("replica: the notification connection broke; reconnecting", "channel", n.channel, "error", err)
			continue
		}
		from, payload, _ := strings.Cut(msg.Payload, " ")
		if from == n.id {
			continue
		}
		n.notify(Notification{Payload: payload})
	}
}

// Notify sends payload (at most 7900 bytes) to the Notifiers of every
// other replica listening on the channel; they receive it once this
// transaction-less statement has run. It does not return before Postgres
// has taken it, and fails when Postgres cannot be reached within the
// Timeout: notifications are not queued.
func (n *Notifier) Notify(ctx context.Context, payload string) error {
	if len(payload) > maxPayload {
		return fmt.Errorf("replica: notification payload of %d bytes exceeds %d", len(payload), maxPayload)
	}
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return errors.New("replica: notifier closed")
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.Timeout)
	defer cancel()
	if _, err := n.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, n.channel, n.id+" "+payload); err != nil {
		return fmt.Errorf("replica: notify %s: %w", n.channel, err)
	}
	return nil
}

// Close stops listening and waits for the goroutine (and a running
// onNotify) to return. It is idempotent.
func (n *Notifier) Close() error {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	<-n.done
	return nil
}
