package replica

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
)

// Options configure a [Directory]. Addr and Secret are required; zero
// fields take the documented defaults.
type Options struct {
	// Addr is the base URL at which the other replicas reach this one
	// ("http://10.1.2.3:8080"): scheme, host and port, no path. In
	// Kubernetes, the pod's address behind a headless service. Required.
	Addr string
	// Name names the replica in logs and in agentsurface_replicas.
	// Default: the host name.
	Name string
	// Secret is shared by every replica, at least 32 bytes. It keys the
	// hash under which the directory stores session tokens (a copy of the
	// table reveals no token, and cannot confirm a guessed one) and
	// authenticates the requests replicas forward to each other. Required.
	Secret []byte
	// Lease is how long this replica's claim on its sessions lasts without
	// renewal; it renews every Lease/3. A replica that dies loses its
	// sessions when the lease runs out; a Postgres outage shorter than the
	// lease costs nothing. Default 15s.
	Lease time.Duration
	// Timeout bounds each statement sent to Postgres and each connection
	// attempt to another replica. Default 2s.
	Timeout time.Duration
	// OnLeaseLost is called, on the directory's own goroutine, when this
	// replica's lease ran out before it could renew it (Postgres was
	// unreachable for longer than Lease, or this process stalled). Every
	// other replica then treats this replica's sessions as ended; end them
	// here too, so that no session is live on one replica and ended on
	// the others. The directory then registers again under a new
	// [Directory.ID]; sessions created from then on are claimed under it.
	// It must not call Close, which waits for that goroutine.
	OnLeaseLost func()
	// Logger receives diagnostics. Default: discard.
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
	// ErrLeaseLost: this replica's lease ran out; it cannot claim sessions
	// until it has registered again.
	ErrLeaseLost = errors.New("replica: this replica's lease has run out")
	// ErrClaimed: a session key is owned by another live replica.
	ErrClaimed = errors.New("replica: the session is owned by another replica")
	// ErrClosed: the directory has been closed.
	ErrClosed = errors.New("replica: directory closed")
)

// Owner is the replica that owns a session.
type Owner struct {
	ID    string // the replica's id (a new one each time it starts)
	Name  string
	Addr  string
	Local bool // the owner is this replica
}

// Directory is this replica's view of the session directory: it
// registers the replica with a lease it renews, claims and releases the
// sessions the replica creates, and answers which replica owns a session.
// It is safe for concurrent use.
type Directory struct {
	pool       *pgxpool.Pool
	opts       Options
	log        *slog.Logger
	sessionKey []byte // HMAC key of session-token hashes
	hopKey     []byte // HMAC key of forwarded-request signatures
	transport  *http.Transport
	stats      *stats
	metrics    metric.Registration
	stop       chan struct{}
	done       chan struct{}

	mu       sync.Mutex
	id       string           // this replica's current registration
	deadline time.Time        // when the lease runs out unless renewed (local clock)
	lost     bool             // the lease ran out; not registered again yet
	own      map[key]struct{} // the keys this registration claimed
	releases []key            // released keys not yet deleted from the table
	peers    map[string]*peer // live replicas a request was forwarded to, by id
	cache    map[key]string   // owner id of keys looked up
	closed   bool
	frozen   bool // tests: the renewal loop was stopped without a trace, as a crash would

	stopOnce sync.Once
}

// key is the keyed hash of a session token: what the directory stores.
type key [sha256.Size]byte

// peer is another live replica.
type peer struct {
	id, name string
	url      *url.URL
	inflight map[*inflight]struct{} // requests forwarded to it (guarded by Directory.mu)
	gone     bool
}

// inflight is one request forwarded to a peer; stop ends it.
type inflight struct{ stop func(error) }

// Bounds of the directory's memory.
const (
	maxCached   = 100_000 // owner ids of remote sessions remembered
	maxReleases = 100_000 // releases waiting for Postgres; beyond, they die with the lease
)

// OpenDirectory registers this replica in the directory (run [Migrate]
// first) and starts renewing its lease. Close it when the replica stops:
// its sessions then end at once for every replica.
func OpenDirectory(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Directory, error) {
	if opts == nil {
		return nil, errors.New("replica: Options.Addr and Options.Secret are required")
	}
	o := *opts
	if len(o.Secret) < 32 {
		return nil, errors.New("replica: Options.Secret must be at least 32 bytes, the same on every replica")
	}
	if err := checkAddr(o.Addr); err != nil {
		return nil, err
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
		pool: pool, opts: o, log: o.Logger,
		sessionKey: derive(o.Secret, "agentsurface session key v1"),
		hopKey:     derive(o.Secret, "agentsurface replica hop v1"),
		stats:      new(stats),
		stop:       make(chan struct{}), done: make(chan struct{}),
		own: map[key]struct{}{}, peers: map[string]*peer{}, cache: map[key]string{},
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.transport = &http.Transport{
		Proxy:               nil, // replicas talk directly, whatever the environment says
		DialContext:         (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // relay the bytes as they are
	}
	if err := d.register(ctx); err != nil {
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
		return fmt.Errorf("replica: Options.Addr %q must be a base URL such as http://10.1.2.3:8080", addr)
	}
	return nil
}

// derive returns a key for one use of the shared secret.
func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// ID returns this replica's current id in the directory. It changes when
// the lease was lost and the replica registered again.
func (d *Directory) ID() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.id
}

// key returns the stored form of a session token.
func (d *Directory) key(token string) key {
	m := hmac.New(sha256.New, d.sessionKey)
	m.Write([]byte(token))
	var k key
	m.Sum(k[:0])
	return k
}

// register adds this replica to agentsurface_replicas under a new id.
func (d *Directory) register(ctx context.Context) error {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	id := "r_" + hex.EncodeToString(b)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	_, err := d.pool.Exec(ctx, `INSERT INTO agentsurface_replicas (id, name, addr, expires_at)
		VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')`,
		id, d.opts.Name, d.opts.Addr, d.opts.Lease.Milliseconds())
	if err != nil {
		return fmt.Errorf("replica: register: %w", err)
	}
	d.mu.Lock()
	d.id, d.deadline, d.lost = id, start.Add(d.opts.Lease), false
	d.mu.Unlock()
	d.log.Info("replica: registered", "replica", id, "name", d.opts.Name, "addr", d.opts.Addr, "lease", d.opts.Lease)
	return nil
}

// Claim records that this replica owns the session of each token (a
// session may have several: a cookie, a bearer token, a join code). Call
// it before the tokens are handed out, so that no request can name the
// session before the directory knows its owner. It fails with
// [ErrLeaseLost] while this replica is not registered, with [ErrClaimed]
// when another live replica owns one of the tokens (then nothing is
// claimed), and with [ErrUnavailable] when Postgres cannot be reached in
// time.
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
	d.mu.Lock()
	id, lost, closed := d.id, d.lost, d.closed
	d.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case lost:
		return ErrLeaseLost
	case len(tokens) == 0:
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var alive bool
	claim := func() error {
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
	}
	err := claim()
	if again(ctx, d.pool, err) { // claiming twice is claiming once
		err = claim()
	}
	switch {
	case errors.Is(err, ErrClaimed):
		return ErrClaimed
	case err != nil:
		return fmt.Errorf("%w: claim: %v", ErrUnavailable, err)
	case !alive:
		return ErrLeaseLost
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.id != id || d.lost {
		return ErrLeaseLost // lost while claiming: the claim went with the lease
	}
	for _, k := range ks {
		d.own[k] = struct{}{}
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
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range ks {
		if _, ok := d.own[k]; !ok {
			continue
		}
		delete(d.own, k)
		if len(d.releases) < maxReleases {
			d.releases = append(d.releases, k)
		}
	}
}

// Owner returns the replica that owns the session of token, or
// [ErrNoOwner] when no live replica does.
func (d *Directory) Owner(ctx context.Context, token string) (Owner, error) {
	p, local, err := d.lookup(ctx, d.key(token))
	switch {
	case err != nil:
		return Owner{}, err
	case local:
		return Owner{ID: d.ID(), Name: d.opts.Name, Addr: d.opts.Addr, Local: true}, nil
	}
	return Owner{ID: p.id, Name: p.name, Addr: p.url.String()}, nil
}

// lookup finds the owner of k: this replica (local), a live peer, or
// none (ErrNoOwner). Keys this replica claimed and owners looked up
// before are answered from memory; only the first request for another
// replica's session reads Postgres. An owner never changes while its
// session lives, so what is remembered stays true until the owner's lease
// runs out, when the renewal forgets it.
func (d *Directory) lookup(ctx context.Context, k key) (*peer, bool, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, false, ErrClosed
	}
	if _, ok := d.own[k]; ok {
		d.mu.Unlock()
		return nil, true, nil
	}
	if id, ok := d.cache[k]; ok {
		if p := d.peers[id]; p != nil {
			d.mu.Unlock()
			return p, false, nil
		}
		delete(d.cache, k)
	}
	self := d.id
	d.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var id, name, addr string
	var live bool
	query := func() error {
		return d.pool.QueryRow(ctx, `SELECT s.replica, r.name, r.addr, r.expires_at > now()
			FROM agentsurface_sessions s JOIN agentsurface_replicas r ON r.id = s.replica
			WHERE s.key = $1`, k[:]).Scan(&id, &name, &addr, &live)
	}
	err := query()
	if again(ctx, d.pool, err) {
		err = query()
	}
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
	u, err := url.Parse(addr)
	if err != nil || checkAddr(addr) != nil {
		return nil, false, fmt.Errorf("%w: replica %s has the invalid address %q", ErrOwnerUnreachable, id, addr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.peers[id]
	if p == nil {
		p = &peer{id: id, name: name, url: u, inflight: map[*inflight]struct{}{}}
		d.peers[id] = p
	}
	if len(d.cache) >= maxCached {
		for k := range d.cache { // forget one at random
			delete(d.cache, k)
			break
		}
	}
	d.cache[k] = id
	return p, false, nil
}

// again reports whether a failed statement that is safe to repeat should
// run once more: the connection failed (Postgres did not refuse it) and
// there is time left. A server that restarted leaves every idle
// connection of the pool dead, so the pool is reset first and the retry
// gets a fresh one; connections in use close when they are returned.
func again(ctx context.Context, pool *pgxpool.Pool, err error) bool {
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) || errors.Is(err, pgx.ErrNoRows) || errors.Is(err, ErrClaimed) || ctx.Err() != nil {
		return false
	}
	pool.Reset()
	return true
}

// track registers a request forwarded to p; the renewal stops it with
// ErrOwnerGone if p's lease runs out first. It returns the function that
// unregisters it, or false when p is already gone.
func (d *Directory) track(p *peer, stop func(error)) (untrack func(), ok bool) {
	f := &inflight{stop: stop}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.gone {
		return nil, false
	}
	p.inflight[f] = struct{}{}
	return func() {
		d.mu.Lock()
		delete(p.inflight, f)
		d.mu.Unlock()
	}, true
}

// loop renews the lease every Lease/3 until Close.
func (d *Directory) loop() {
	defer close(d.done)
	t := time.NewTicker(d.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.renew()
		}
	}
}

// renew renews the lease, deletes released rows, learns which replicas
// are live (stopping requests forwarded to those that are not) and
// removes the rows of replicas dead for more than a lease — in one round
// trip. When the lease is lost it says so, and registers again.
func (d *Directory) renew() {
	d.mu.Lock()
	id, lost := d.id, d.lost
	releases := d.releases // this renewal deletes them, or puts them back
	d.releases = nil
	d.mu.Unlock()
	if lost {
		if err := d.register(context.Background()); err != nil {
			d.log.Warn("replica: cannot register again after losing the lease", "error", err)
		}
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	lease := d.opts.Lease.Milliseconds()
	rel := make([][]byte, len(releases))
	for i := range releases {
		rel[i] = releases[i][:]
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE agentsurface_replicas SET expires_at = now() + $2 * interval '1 millisecond'
		WHERE id = $1 AND expires_at > now()`, id, lease)
	b.Queue(`DELETE FROM agentsurface_sessions WHERE replica = $1 AND key = ANY($2::bytea[])`, id, rel)
	b.Queue(`SELECT id FROM agentsurface_replicas WHERE expires_at > now()`)
	b.Queue(`DELETE FROM agentsurface_replicas WHERE expires_at < now() - $1 * interval '1 millisecond'`, lease)
	var renewed bool
	live := map[string]bool{}
	err := func() error {
		res := d.pool.SendBatch(ctx, b)
		defer res.Close()
		tag, err := res.Exec()
		if err != nil {
			return err
		}
		renewed = tag.RowsAffected() == 1
		if _, err := res.Exec(); err != nil {
			return err
		}
		rows, err := res.Query()
		if err != nil {
			return err
		}
		var rid string
		_, err = pgx.ForEachRow(rows, []any{&rid}, func() error { live[rid] = true; return nil })
		if err != nil {
			return err
		}
		_, err = res.Exec()
		return err
	}()
	if err != nil {
		d.mu.Lock()
		left := time.Until(d.deadline)
		d.mu.Unlock()
		if left > 0 {
			d.mu.Lock()
			if d.id == id && !d.lost {
				d.releases = append(releases, d.releases...)
				d.releases = d.releases[:min(len(d.releases), maxReleases)]
			}
			d.mu.Unlock()
			d.log.Warn("replica: cannot renew the lease; retrying", "replica", id, "lease_left", left.Round(time.Millisecond), "error", err)
			return
		}
		d.loseLease(id, err)
		return
	}
	if !renewed {
		d.loseLease(id, errors.New("the lease had expired in the directory"))
		return
	}
	var gone []*peer
	d.mu.Lock()
	if d.id == id && !d.lost {
		d.deadline = start.Add(d.opts.Lease)
	}
	for pid, p := range d.peers {
		if !live[pid] {
			gone = append(gone, p)
		}
	}
	d.mu.Unlock()
	d.forget(gone...)
}

// forget removes replicas that are no longer live: requests for their
// sessions are answered as ended from now on, and those forwarded to
// them and still waiting stop with ErrOwnerGone.
func (d *Directory) forget(gone ...*peer) {
	if len(gone) == 0 {
		return
	}
	var stopped []*inflight
	d.mu.Lock()
	for _, p := range gone {
		if p.gone {
			continue
		}
		p.gone = true
		delete(d.peers, p.id)
		for f := range p.inflight {
			stopped = append(stopped, f)
		}
	}
	for k, pid := range d.cache {
		if d.peers[pid] == nil {
			delete(d.cache, k)
		}
	}
	d.mu.Unlock()
	for _, f := range stopped {
		f.stop(ErrOwnerGone)
	}
}

// left reports whether p, which refused a connection, is no longer live
// in the directory: it left (a clean stop deletes its row at once) or
// its lease ran out. Then it is forgotten, without waiting for the next
// renewal. When Postgres cannot say, p stays: the answer is the 503 of
// an unreachable owner.
func (d *Directory) left(ctx context.Context, p *peer) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.Timeout)
	defer cancel()
	var live bool
	err := d.pool.QueryRow(ctx, `SELECT expires_at > now() FROM agentsurface_replicas WHERE id = $1`, p.id).Scan(&live)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	if live {
		return false
	}
	d.forget(p)
	return true
}

// loseLease forgets the sessions of registration id, tells the host, and
// leaves registering again to the next renewal.
func (d *Directory) loseLease(id string, cause error) {
	d.mu.Lock()
	if d.id != id || d.lost {
		d.mu.Unlock()
		return
	}
	d.lost = true
	n := len(d.own)
	d.own = map[key]struct{}{}
	d.releases = nil
	d.mu.Unlock()
	d.stats.add(outcomeLeaseLost)
	d.log.Error("replica: lease lost; this replica's sessions have ended for every replica", "replica", id, "sessions", n, "cause", cause)
	if d.opts.OnLeaseLost != nil {
		d.opts.OnLeaseLost()
	}
}

// Close stops renewing the lease and removes this replica from the
// directory, so that its sessions end at once for every replica (rather
// than when the lease runs out). Stop serving requests first
// (http.Server.Shutdown), so that no request is forwarded from or to a
// closed directory. It is idempotent.
func (d *Directory) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	id, frozen := d.id, d.frozen
	d.mu.Unlock()
	d.stopOnce.Do(func() { close(d.stop) })
	<-d.done
	if d.metrics != nil {
		_ = d.metrics.Unregister()
	}
	d.transport.CloseIdleConnections()
	if frozen {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	if _, err := d.pool.Exec(ctx, `DELETE FROM agentsurface_replicas WHERE id = $1`, id); err != nil {
		return fmt.Errorf("replica: leave the directory (the lease will run out instead): %w", err)
	}
	return nil
}
