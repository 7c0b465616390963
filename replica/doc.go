// Package replica runs an agentsurface application on several replicas
// behind a load balancer, with Postgres as the shared store.
//
// A session's [surface.Registry] is live UI state: the components a page
// has on screen, its pending confirmations, its MCP sessions. It lives in
// the memory of the replica that created it (its owner) and is never
// persisted: an approval cannot resurrect a context that is gone. What
// must outlive a process lives in Postgres: which replica owns each
// session (the directory), the audit trail, and the domain's own data.
// Every request for a session's live state — the page and its event
// stream, its form posts and approvals, its WebMCP calls, an agent's MCP
// messages — is served by the owner, whichever replica the load balancer
// gave it to:
//
//	            load balancer (any replica, no stickiness)
//	           /               |               \
//	    replica A          replica B          replica C
//	  sessions 1, 2   ───▶  session 3   ◀───  sessions 4, 5
//	(forwards 3 to B)                       (forwards 3 to B)
//	           \               |               /
//	  Postgres: agentsurface_replicas (leases), agentsurface_sessions
//	            (owner by keyed token hash), agentsurface_audit
//
// Set it up once per replica:
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	// ...
//	if err := replica.Migrate(ctx, pool); err != nil { /* ... */ }
//	dir, err := replica.OpenDirectory(ctx, pool, &replica.Options{
//		Addr:        "http://" + podIP + ":8080", // where the other replicas reach this one
//		Secret:      secret,                      // the same 32+ bytes on every replica
//		OnLeaseLost: app.EndAllSessions,
//	})
//	// ...
//	defer dir.Close()
//	srv := &http.Server{Handler: dir.Forward(app, replica.ForwardOptions{Token: sessionToken})}
//
// # The session directory
//
// [OpenDirectory] registers the replica under a fresh id (each start is a
// new id) with a lease, which it renews every Lease/3. [Directory.Claim]
// records that the replica owns a session, under each of the session's
// tokens (a cookie, an MCP bearer token, a join code): call it before the
// tokens are handed out. [Directory.Release] forgets a session that ended.
// The table holds an HMAC-SHA-256 of each token under a key derived from
// Options.Secret, never the token: reading it (or a backup) reveals no
// token and cannot confirm a guessed one.
//
// A replica that dies stops renewing; when its lease runs out its sessions
// have no live owner, and every replica answers for them as for an ended
// session. A replica that could not renew within its lease (Postgres
// unreachable for longer than Lease, a stalled process) has lost its
// sessions in the eyes of every other replica: the directory calls
// Options.OnLeaseLost, which should end the replica's sessions locally too,
// and registers again under a new id. [Directory.Close] leaves the
// directory at once, so a replica that stops cleanly ends its sessions
// without waiting for the lease. A session never moves: its owner is fixed
// for its life, which is why a replica remembers the owners it looked up
// and reads Postgres only for the first request of another replica's
// session.
//
// # Forwarding
//
// [Directory.Forward] wraps the application's handler. ForwardOptions.Token
// names a request's session (from a cookie or an Authorization header;
// "" when it names none). Then:
//
//	names no session, or this replica owns it  → served here
//	another live replica owns it               → proxied to it
//	no live replica owns it (ended, unknown)   → ForwardOptions.Ended; by default
//	                                              served here, where the app knows no
//	                                              such session and answers as it does
//	                                              for an ended one
//	the directory cannot be read in time       → 503, Retry-After (ErrUnavailable)
//	the owner refuses connections              → 503, Retry-After (ErrOwnerUnreachable)
//	the connection to the owner breaks         → 502 (ErrOwnerFailed)
//	the owner's lease runs out before it answers → 502 (ErrOwnerGone)
//	no response headers in ResponseHeaderTimeout → 504 (ErrOwnerTimeout)
//	a forged or stale hop header               → 403 (ErrBadHop)
//
// No request waits past these bounds: a Postgres statement past
// Options.Timeout, a connection attempt past Options.Timeout, a stalled
// owner past its lease (the renewal sees it go and stops the requests
// waiting on it), a slow one past ResponseHeaderTimeout where set, and a
// client that goes away cancels its forwarded request.
//
// Proxying streams: every write of the owner reaches the client at once
// (server-sent events, the MCP Streamable HTTP GET stream and POST
// responses streamed as events), and the request body streams to the
// owner, both at once (full duplex: an owner may answer while the body
// still arrives). The owner sees the request as the client sent it — method,
// request URI, Host, cookies, Authorization — plus X-Forwarded-For,
// X-Forwarded-Host and X-Forwarded-Proto (kept from a load balancer in
// front, or set), and [ForwardedFrom] tells it which replica forwarded it.
//
// The owner authenticates the token itself, exactly as without
// forwarding. Forwarding adds no authority: a forged or guessed token
// finds no owner (it is not in the directory) and gets the ended answer,
// and a request that does reach a replica is judged there by its own
// token. Replicas authenticate each other: a forwarded request carries
// [HopHeader], an HMAC under a key derived from Options.Secret over the
// sending and receiving replica ids, the time, the method, Host, request
// URI and the session's key. A request carrying it is served where it
// lands and never forwarded again (no loops, even when directories
// disagree); one whose header does not verify, or is older than
// MaxHopAge, is refused before the application sees it. A request
// forwarded to an earlier registration of a replica (its address reused
// after a restart) is answered as ended. The directory and the replicas
// are trusted infrastructure: whoever can write the tables or holds the
// secret can misdirect requests (and the tokens they carry); a replica
// that answers for a session it does not hold only answers as ended.
//
// # Notifications and approvals
//
// Everything that concerns one session arrives as an HTTP request naming
// that session, so forwarding delivers it to the owner: an approval
// clicked on another device (a form post with the session's cookie), the
// page's event stream that shows the session's changes, an agent's MCP
// tools/call held open while it waits for that approval, and the MCP
// change notifications (tools/list_changed) on the session's MCP stream
// or, for 2026-07-28 clients, its subscriptions/listen request. The
// owner's registry decides; nothing of it crosses Postgres. Forwarding is
// the one mechanism, so the ordering and authentication of a single
// replica hold unchanged.
//
// What forwarding cannot carry is a change that no request names: a
// domain write executed on one replica changes what the sessions on every
// replica show (their tables, their selections, the availability of their
// tools). A [Notifier] broadcasts it with Postgres LISTEN/NOTIFY: each
// replica listens and refreshes its own sessions. Notifications are not
// durable: after a broken connection the Notifier reports a Resync and the
// application refreshes everything, as it would after a restart.
//
// # Audit
//
// An [AuditSink] writes the audit records of every registry of the
// replica to agentsurface_audit, the one table of the whole deployment
// (the replica and the session are columns). It never blocks a call:
// records queue and are written in batches with COPY. While Postgres is
// down they stay queued, up to AuditOptions.QueueSize; beyond it they are
// dropped, counted and logged, never silently. Close writes what is
// queued.
//
// # Metrics
//
// Through the OpenTelemetry meter provider of Options.MeterProvider and
// AuditOptions.MeterProvider (default: the global one), read when
// collected:
//
//	agentsurface.replica.requests  counter  {request}  agentsurface.replica.outcome: local | forwarded |
//	                                                   received | ended | directory_unavailable |
//	                                                   owner_unreachable | owner_failed | owner_gone |
//	                                                   owner_timeout | bad_hop | lease_lost
//	agentsurface.replica.sessions  gauge    {key}      session keys this replica owns
//	agentsurface.audit.records     counter  {record}   agentsurface.audit.outcome: written | dropped
//	agentsurface.audit.queue       gauge    {record}   records waiting to be written
//
// [Directory.Stats] and [AuditSink.Stats] return the same counts.
//
// # Postgres outages
//
// A replica keeps serving its own sessions, and the sessions of others it
// has already looked up, while Postgres is unreachable; requests that need
// the directory get 503 within Options.Timeout; new sessions cannot be
// claimed; audit records queue. When Postgres is back everything resumes
// at once: after a connection failure the directory and the audit sink
// reset the pool (a restarted server leaves every idle connection dead),
// and an owner lookup or a claim, both safe to repeat, runs once more on
// a fresh connection. An outage longer than the lease ends
// every session, as above: choose the lease longer than a Postgres
// failover takes.
package replica
