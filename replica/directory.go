package replica

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
)

// Options configure a [Directory]. Nil, like every zero field, means the
// documented defaults.
type Options struct {
	// Name names the replica in logs, in agentsurface_replicas and in the
	// [ServedByHeader] of its answers. Default: the host name.
	Name string
	// Lease is how long this replica's claim on its sessions lasts without
	// renewal. The directory renews it every Lease/20 and, after a failed
	// renewal, tries again every Lease/50, so that at most a twentieth of
	// it has gone when Postgres becomes unreachable: an outage shorter
	// than about nine tenths of the lease (less the time to reconnect)
	// costs no session. A replica that dies loses its sessions when its
	// lease runs out. Default 15s.
	Lease time.Duration
	// Timeout bounds each statement sent to Postgres and each connection
	// attempt to another replica. Default 2s.
	Timeout time.Duration
	// OnLeaseLost is called, on the directory's own goroutine, when this
	// replica's lease may have run out before it could renew it (Postgres
	// unreachable for about as long as Lease, or this process stalled).
	// Every other replica then treats this replica's sessions as ended,
	// and this one has answered them as ended since the lease's deadline;
	// end them here too, so that no session stays live on one replica
	// after it ended on the others. The directory then registers again
	// under a new [Directory.ID]; sessions created from then on are
	// claimed under it. It must not call Close, which waits for that
	// goroutine.
	OnLeaseLost func()
	// Logger receives diagnostics: the lease's failures and recovery,
	// the replicas that join and leave, forwarding failures. Default:
	// discard.
	Logger *slog.Logger
	// MeterProvider makes the directory's metrics (see the package
	// documentation). Default: the global meter provider.
	MeterProvider metric.MeterProvider
}

// Errors of the directory and of forwarding. Answers to HTTP requests
// carry them to [ForwardOptions.ErrorHandler], wrapped: test them with
// errors.Is.
var (
	// ErrNoOwner: no live replica owns the session. It has ended (or never
	// existed; the two are indistinguishable by design).
	ErrNoOwner = errors.New("replica: no live replica owns this session")
	// ErrUnavailable: the session directory (Postgres) could not be read
	// in time.
	ErrUnavailable = errors.New("replica: the session directory is unavailable")
	// ErrLeaseLost: this replica's lease may have run out; it cannot
	// claim sessions until it has registered again.
	ErrLeaseLost = errors.New("replica: this replica's lease has run out")
	// ErrClaimed: a session key is owned by another live replica.
	ErrClaimed = errors.New("replica: the session is owned by another replica")
	// ErrDraining: the replica is stopping ([Directory.Drain]); it claims
	// no new session.
	ErrDraining = errors.New("replica: this replica is draining")
	// ErrClosed: the directory has been closed.
	ErrClosed = errors.New("replica: directory closed")
)

// Owner is the replica that owns a session.
type Owner struct {
	ID    string // the replica's id (a new one each time it registers)
	Name  string
	Addr  string
	Local bool // the owner is this replica
}

// Directory is this replica's view of the session directory, the public
// front of three parts: the replica's lease (lease.go), the sessions it
// owns and the owners it looked up (ownership.go), and the other live
// replicas it forwards to (peers.go). It is safe for concurrent use.
type Directory struct {
	pool       *pgxpool.Pool // the application's; the directory never resets or closes it
	attempts   int           // tries of a statement safe to repeat: the pool's MaxConns + 1
	addr       string
	opts       Options
	log        *slog.Logger
	sessionKey []byte // HMAC key of session-token hashes
	hopKey     []byte // HMAC key of forwarded-request signatures
	transport  *http.Transport
	stats      *stats
	metrics    metric.Registration

	lease  lease     // this replica's registration and its deadline
	owned  ownership // keys claimed here, releases, owners looked up
	peers  peers     // the other live replicas
	every  time.Duration
	retry  time.Duration
	wake   chan struct{} // a request found the lease's deadline passed
	stop   chan struct{} // closed to stop the renewal loop
	done   chan struct{} // closed when the renewal loop has returned
	stopMu sync.Mutex    // makes closing stop idempotent
	halted bool          // stop is closed

	mu       sync.Mutex
	draining bool
	closed   bool
}

// key is the keyed hash of a session token: what the directory stores.
type key [sha256.Size]byte

// Bounds of the directory's memory.
const (
	maxCached   = 100_000 // owner ids of remote sessions remembered
	maxReleases = 100_000 // releases waiting for Postgres; beyond, they die with the lease
)

// OpenDirectory registers this replica in the directory (run [Migrate]
// first) and starts renewing its lease. addr is the base URL at which the
// other replicas reach this one ("http://10.1.2.3:8080": scheme, host and
// port, no path; in Kubernetes, the pod's address). secret, at least 32
// bytes, is the same on every replica: it keys the hash under which the
// directory stores session tokens (a copy of the table reveals no token,
// and cannot confirm a guessed one) and authenticates the requests
// replicas forward to each other. opts may be nil.
//
// The directory runs its statements on pool, the application's, and
// leaves it as it is: it neither resets nor closes it. A statement safe
// to repeat that fails on a connection broken by a Postgres restart runs
// again, at most once per connection the pool can hold, and the pool
// replaces broken connections itself (pgxpool pings a connection idle for
// more than a second before handing it out). Close the directory before
// the pool.
func OpenDirectory(ctx context.Context, pool *pgxpool.Pool, addr string, secret []byte, opts *Options) (*Directory, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := checkAddr(addr); err != nil {
		return nil, err
	}
	if len(secret) < 32 {
		return nil, errors.New("replica: the secret must be at least 32 bytes, the same on every replica")
	}
	if o.Name == "" {
		o.Name, _ = os.Hostname()
	}
	if o.Lease <= 0 {
		o.Lease = 15 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	d := &Directory{
		pool: pool, attempts: int(pool.Config().MaxConns) + 1, addr: addr, opts: o, log: o.Logger,
		sessionKey: derive(secret, "agentsurface session key v1"),
		hopKey:     derive(secret, "agentsurface replica hop v1"),
		stats:      &stats{},
		every:      o.Lease / 20, retry: max(o.Lease/50, 10*time.Millisecond),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.owned.init()
	d.peers.init(d.log)
	d.transport = &http.Transport{
		Proxy:               nil, // replicas talk directly, whatever the environment says
		DialContext:         (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // relay the bytes as they are
	}
	if err := d.register(ctx, ""); err != nil {
		return nil, err
	}
	d.metrics = d.registerMetrics(o.MeterProvider)
	go d.loop()
	return d, nil
}

func checkAddr(addr string) error {
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("replica: the address %q must be a base URL such as http://10.1.2.3:8080", addr)
	}
	return nil
}

// derive returns a key for one use of the shared secret.
func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// ID returns this replica's current id in the directory: "r_" and 26
// characters of base32 (A–Z, 2–7), random. It changes when the lease was
// lost and the replica registered again.
func (d *Directory) ID() string { return d.lease.current() }

// Name returns the replica's name (Options.Name).
func (d *Directory) Name() string { return d.opts.Name }

// Ready reports whether this replica should receive new requests: nil
// while it is registered with a lease that has not run out and is neither
// draining nor closed; else [ErrLeaseLost], [ErrDraining] or [ErrClosed].
// A Postgres outage shorter than the lease leaves it ready: the replica
// still serves every session it owns. Serve it as a readiness probe
// (/readyz: 200 when nil, 503 otherwise), so that a load balancer stops
// sending requests to a replica before it stops.
func (d *Directory) Ready() error {
	_, err := d.open()
	return err
}

// open returns this replica's id while it may take new sessions: not
// closed, not draining, its lease not run out; else the error saying
// which.
func (d *Directory) open() (id string, _ error) {
	d.mu.Lock()
	closed, draining := d.closed, d.draining
	d.mu.Unlock()
	switch {
	case closed:
		return "", ErrClosed
	case draining:
		return "", ErrDraining
	}
	return d.lease.valid(time.Now())
}

// Drain begins a clean stop: from now on [Directory.Ready] reports
// [ErrDraining] and Claim refuses new sessions with it, while the replica
// goes on serving and forwarding every request as before. Stop in three
// phases: Drain, then wait for the load balancer to see the readiness
// probe fail (a few of its probe periods), then stop the HTTP server
// (Shutdown), end the application's sessions and [Directory.Close]. It is
// idempotent.
func (d *Directory) Drain() {
	d.mu.Lock()
	first := !d.draining && !d.closed
	d.draining = true
	d.mu.Unlock()
	if first {
		d.log.Info("replica: draining; not ready for new requests", "replica", d.ID(), "name", d.opts.Name)
	}
}

// key returns the stored form of a session token.
func (d *Directory) key(token string) key {
	m := hmac.New(sha256.New, d.sessionKey)
	m.Write([]byte(token))
	var k key
	m.Sum(k[:0])
	return k
}

// Claim records that this replica owns the session of each token (a
// session may have several: a cookie, a bearer token, a join code). Call
// it before the tokens are handed out, so that no request can name the
// session before the directory knows its owner. It fails with
// [ErrLeaseLost] while this replica's lease may have run out, with
// [ErrDraining] once [Directory.Drain] was called, with [ErrClaimed] when
// another live replica owns one of the tokens (then nothing is claimed),
// and with [ErrUnavailable] when Postgres cannot be reached in time (a
// Postgres outage: no session can start on any replica until it is back).
func (d *Directory) Claim(ctx context.Context, tokens ...string) error {
	var ks []key
	for _, t := range tokens {
		if k := d.key(t); !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	keys := make([][]byte, len(ks))
	for i := range ks {
		keys[i] = ks[i][:]
	}
	id, err := d.open()
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var alive bool
	err = d.retried(ctx, func() error { // claiming twice is claiming once
		return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agentsurface_replicas WHERE id = $1 AND expires_at > now())`,
				id).Scan(&alive); err != nil || !alive {
				return err
			}
			// A key a dead replica held is taken over; one a live replica
			// holds is not.
			tag, err := tx.Exec(ctx, `INSERT INTO agentsurface_sessions AS s (key, replica)
			SELECT k, $1 FROM unnest($2::bytea[]) AS k
			ON CONFLICT (key) DO UPDATE SET replica = EXCLUDED.replica, claimed_at = now()
			WHERE s.replica = EXCLUDED.replica OR NOT EXISTS (
				SELECT 1 FROM agentsurface_replicas r WHERE r.id = s.replica AND r.expires_at > now())`, id, keys)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != int64(len(keys)) {
				return ErrClaimed // rolls the others back
			}
			return nil
		})
	})
	switch {
	case errors.Is(err, ErrClaimed):
		return ErrClaimed
	case err != nil:
		return fmt.Errorf("%w: claim: %v", ErrUnavailable, err)
	case !alive:
		return ErrLeaseLost
	}
	// Lost while claiming: the claim went with the lease.
	if !d.owned.add(id, ks) {
		return ErrLeaseLost
	}
	if _, err := d.lease.valid(time.Now()); err != nil {
		return err
	}
	return nil
}

// Release records that the sessions of tokens have ended on this
// replica. It does not wait for Postgres: requests for them are answered
// as for an ended session at once (this replica no longer owns them, and
// one forwarded here by a replica that has not heard finds no session),
// and the rows go at the next renewal. A released token is spent: do not
// claim it again.
func (d *Directory) Release(tokens ...string) {
	ks := make([]key, len(tokens))
	for i, t := range tokens {
		ks[i] = d.key(t)
	}
	d.owned.release(ks)
}

// Owner returns the replica that owns the session of token, or
// [ErrNoOwner] when no live replica does. For a session of this replica
// after its lease's deadline, until the lease is given up, it returns
// [ErrLeaseLost].
func (d *Directory) Owner(ctx context.Context, token string) (Owner, error) {
	p, local, err := d.lookup(ctx, d.key(token))
	switch {
	case err != nil:
		return Owner{}, err
	case local:
		return Owner{ID: d.ID(), Name: d.opts.Name, Addr: d.addr, Local: true}, nil
	}
	return Owner{ID: p.id, Name: p.name, Addr: p.url.String()}, nil
}

// lookup finds the owner of k: this replica (local), a live peer, or
// none (ErrNoOwner). Keys this replica claimed and owners looked up
// before are answered from memory, so a Postgres outage does not reach
// them; only the first request for another replica's session reads
// Postgres. A key this replica owns is local only while its lease has not
// run out, checked now on the local monotonic clock: from the lease's
// deadline on, when every other replica may answer it as ended, it is
// ErrLeaseLost, until the renewal (woken at once) has forgotten it. An owner never changes while its session lives, so what is
// remembered stays true until the owner's lease runs out, when the
// renewal forgets it.
func (d *Directory) lookup(ctx context.Context, k key) (*peer, bool, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, false, ErrClosed
	}
	if d.owned.owns(k) {
		if _, err := d.lease.valid(time.Now()); err != nil {
			d.poke() // the renewal loses the lease at once
			return nil, false, fmt.Errorf("%w: the session is this replica's", err)
		}
		return nil, true, nil
	}
	if id, ok := d.owned.cached(k); ok {
		if p := d.peers.get(id); p != nil {
			return p, false, nil
		}
		d.owned.uncache(k)
	}
	self := d.ID()

	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var id, name, addr string
	var live bool
	err := d.retried(ctx, func() error {
		return d.pool.QueryRow(ctx, `SELECT s.replica, r.name, r.addr, r.expires_at > now()
			FROM agentsurface_sessions s JOIN agentsurface_replicas r ON r.id = s.replica
			WHERE s.key = $1`, k[:]).Scan(&id, &name, &addr, &live)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, ErrNoOwner
	case err != nil:
		return nil, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case !live || id == self:
		// A dead owner; or this replica, which released the session (the
		// row goes at the next renewal) or claimed it under a lease that
		// has since run out.
		return nil, false, ErrNoOwner
	}
	p, err := d.peers.found(id, name, addr)
	if err != nil {
		return nil, false, err
	}
	d.owned.remember(k, id)
	return p, false, nil
}

// poke wakes the renewal loop.
func (d *Directory) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Close stops renewing the lease and removes this replica from the
// directory, so that its sessions end at once for every replica (rather
// than when the lease runs out). Stop serving requests first
// (http.Server.Shutdown), so that no request is forwarded from or to a
// closed directory; see [Directory.Drain] for the phases of a clean stop.
// It is idempotent.
func (d *Directory) Close() error { return d.shutdown(true) }

// shutdown closes the directory; leave removes its row (a clean stop),
// else the lease runs out on its own (tests: as if the process died).
func (d *Directory) shutdown(leave bool) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.halt()
	if d.metrics != nil {
		_ = d.metrics.Unregister()
	}
	d.transport.CloseIdleConnections()
	if !leave {
		return nil
	}
	id := d.ID()
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	err := d.retried(ctx, func() error {
		_, err := d.pool.Exec(ctx, `DELETE FROM agentsurface_replicas WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("replica: leave the directory (the lease will run out instead): %w", err)
	}
	d.log.Info("replica: left the directory", "replica", id, "name", d.opts.Name)
	return nil
}

// halt stops the renewal loop and waits for it.
func (d *Directory) halt() {
	d.stopMu.Lock()
	if !d.halted {
		d.halted = true
		close(d.stop)
	}
	d.stopMu.Unlock()
	<-d.done
}
