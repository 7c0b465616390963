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
//	dir, err := replica.OpenDirectory(ctx, pool,
//		"http://"+podIP+":8080", // where the other replicas reach this one
//		secret,                  // the same 32+ bytes on every replica
//		&replica.Options{OnLeaseLost: app.EndAllSessions})
//	// ...
//	defer dir.Close()
//	srv := &http.Server{Handler: dir.Forward(app, sessionToken, nil)}
//
// Required values are arguments; optional ones are in an options struct,
// where nil and every zero field mean the documented default
// ([OpenDirectory], [Directory.Forward], [NewAuditSink], [NewNotifier]).
// The package runs its statements on the application's pool and never
// resets or closes it.
//
// # The session directory
//
// [OpenDirectory] registers the replica under a fresh id (each start is a
// new id: "r_" and 26 random base32 characters) with a lease, which it
// renews every Lease/20, and every Lease/50 after a failed renewal.
// [Directory.Claim] records that the replica owns a session, under each
// of the session's tokens (a cookie, an MCP bearer token, a join code):
// call it before the tokens are handed out. [Directory.Release] forgets a
// session that ended. The table holds an HMAC-SHA-256 of each token under
// a key derived from the secret, never the token: reading it (or a
// backup) reveals no token and cannot confirm a guessed one.
//
// The lease has a deadline on the replica's own monotonic clock: the
// start of its last successful renewal plus Lease, which is never later
// than the expiry Postgres records. Every request for a session the
// replica owns checks it: from the deadline on, the replica refuses its
// own sessions (503, [ErrLeaseLost]) — it never serves one that the
// others may already answer as ended — and gives the lease up at once:
// the directory calls Options.OnLeaseLost, which should end the
// replica's sessions locally too, and registers again under a new id.
// This happens when Postgres is unreachable for about as long as the
// lease, or when the process stalls (a pause, a frozen VM).
//
// A replica that dies stops renewing; when its lease runs out its
// sessions have no live owner, and every replica answers for them as for
// an ended session. [Directory.Close] leaves the directory at once, so a
// replica that stops cleanly ends its sessions without waiting for the
// lease. A session never moves: its owner is fixed for its life, which is
// why a replica remembers the owners it looked up and reads Postgres only
// for the first request of another replica's session.
//
// Each replica learns from its renewals which others are live, and logs
// (with the peer's id, name, address and why) when one appears, when one
// leaves the directory (Info: a clean stop) and when one's lease runs out
// (Warn: a crash, a stall, or Postgres unreachable from it).
//
// # Readiness and stopping
//
// [Directory.Ready] is nil while the replica is registered with a live
// lease and neither draining nor closed: serve it as the load balancer's
// readiness probe (/readyz). A clean stop has three phases:
// [Directory.Drain] (Ready fails with [ErrDraining] and no new session is
// claimed here, while every request is still served and forwarded), a
// wait of a few probe periods until the balancer has stopped sending
// requests, then http.Server.Shutdown, ending the application's sessions
// and [Directory.Close].
//
// # Forwarding
//
// [Directory.Forward] wraps the application's handler. ForwardOptions.Token
// names a request's session (from a cookie or an Authorization header;
// "" when it names none). Then:
//
//	names no session, or this replica owns it  → served here
//	this replica owns it, past its lease's deadline → 503, Retry-After (ErrLeaseLost)
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
// waiting on it), an owner that is alive but does not answer past
// ResponseHeaderTimeout (default one minute; requests that
// ForwardOptions.LongLived marks, such as a call held for a person's
// approval, wait longer), and a client that goes away cancels its
// forwarded request. Every answer carries [ServedByHeader]
// (Agentsurface-Replica: the name of the replica that served it; a
// forwarded answer keeps the owner's).
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
// (the replica and the session are columns). Records queue and are
// written in batches, each a single statement. By default it never
// blocks a call, and a process that dies loses the records still queued
// (those of the last milliseconds). With AuditOptions.Durable, Record
// returns once its record is committed, so no call is answered before its
// settlement record is stored; concurrent records share one statement
// and commit (group commit), so its throughput grows with concurrent
// calls: below the asynchronous sink's while few calls are under way,
// close to it with many (see AuditOptions.Durable for figures). While
// Postgres is down records stay queued, up to AuditOptions.QueueSize
// (and, when durable, for at most AuditOptions.Timeout); beyond, they are
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
//	                                                   owner_timeout | bad_hop | lease_lost | past_lease
//	agentsurface.replica.sessions  gauge    {key}      session keys this replica owns
//	agentsurface.audit.records     counter  {record}   agentsurface.audit.outcome: written | dropped
//	agentsurface.audit.queue       gauge    {record}   records waiting to be written
//
// [Directory.Stats] and [AuditSink.Stats] return the same counts.
//
// # Postgres outages
//
// A session's live state is in its owner's memory; only changes of
// ownership need Postgres. While Postgres is unreachable:
//
//   - a replica serves every session it owns, for as long as its lease
//     lasts, and forwards requests for the sessions of others it has
//     looked up before; nothing of it waits on Postgres;
//   - a request that needs the directory — the first request, on this
//     replica, of another replica's session — gets 503 with Retry-After
//     within Options.Timeout (at once when Postgres refuses connections);
//   - no session can be claimed (Claim: [ErrUnavailable]; the application
//     answers 503), released sessions are deleted from the table later;
//   - renewals fail and are retried every Lease/50, and the asynchronous
//     audit sink queues (the durable one makes each audited call wait up
//     to AuditOptions.Timeout, then drops and counts the record).
//
// When Postgres is back everything resumes at once: the first renewal
// runs within Lease/50, an owner lookup or a claim (both safe to repeat)
// that meets a connection the restart broke runs again on another, and
// the pool replaces broken connections itself.
//
// What an outage costs, with renewals every Lease/20: an outage shorter
// than about 0.9×Lease, less the few milliseconds a reconnection takes,
// costs no session (at most Lease/20 of the lease has gone when it
// begins, and a failed renewal is retried every Lease/50). A longer one
// ends every session of every replica: each replica's lease runs out,
// it refuses its sessions from its lease's deadline and gives them up
// (OnLeaseLost), and registers anew once Postgres is back; pages start
// new sessions, agents pair again. Choose the lease longer than a
// Postgres failover takes.
package replica
