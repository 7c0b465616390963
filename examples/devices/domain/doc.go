// Package domain is the devices domain service of the example app: a
// store of devices and an audit log on SQLite or PostgreSQL, and the
// procedures that make its operations available to AI agents through
// package surface.
//
// # The store
//
// [Open] opens (or creates) a SQLite database file, the embedded default;
// [OpenPostgresDB] opens a PostgreSQL database, which several replicas of
// the application share, through any database/sql driver (package
// pgdomain opens one from a URL with pgx, so that this package links no
// PostgreSQL driver). Both migrate the schema and return a [Store]
// that behaves the same on either backend: same results, same order, same
// errors (a property test holds them to it). [Store.Seed] fills an empty
// database with a dozen devices. Replicas that start together on one new
// PostgreSQL database migrate and seed it once: those steps take an
// advisory lock (pg_advisory_xact_lock), and the seed rows are inserted
// with ON CONFLICT DO NOTHING.
//
// Every operation takes the acting [User] explicitly and checks the
// user's permission itself:
//
//	viewer    List, Browse, Get, History
//	operator  List, Browse, Get, History, Disable, Enable
//	admin     everything
//
// Disable and Enable are all-or-nothing: one transaction locks and checks
// every id, changes the statuses and writes one audit_log row per changed
// device (who, what, when, why). Concurrent transitions of the same
// devices run one after the other (BEGIN IMMEDIATE on SQLite, SELECT … FOR
// UPDATE on PostgreSQL), so none is lost or audited twice. Failures are
// values usable with errors.Is: [ErrForbidden], [ErrNotFound] (a
// [*NotFoundError] naming the unknown ids), [ErrInvalid] (an
// [*InvalidError] naming the argument) and [ErrKeyReused] (a
// [*KeyReusedError]).
//
// Case-insensitive matching (Filter.Site, Filter.Query) and the order by
// name fold ASCII letters only, and otherwise compare text byte by byte,
// whatever the PostgreSQL database's collation. Times are stored as
// fixed-width UTC text with millisecond precision.
//
// # Idempotency
//
// [Store.DisableOnce] and [Store.EnableOnce] take an idempotency [Key]: the
// id a consumer chose (the procedures pass the invocation id) and the
// consumer that chose it. Consumers choose their ids independently, as the
// agentsurface registry assumes (its dedupe key is the consumer and the
// id), so a key is (user, consumer, id): the same id chosen by two agents
// is two keys. The first call with a key executes and, in the same
// transaction, records (user id, SHA-256 of the consumer, id) → (action,
// a SHA-256 digest of the normalised request, the result) in the
// idempotency_keys table, whose primary key is those three columns: the
// claim is INSERT … ON CONFLICT, taking over only an expired row. A later
// call of the same user and consumer with the id executes nothing and
// returns the recorded result, with Replayed set; so does a concurrent
// one, on any replica: on PostgreSQL it waits on the unique index until
// the first transaction ends, then reads the committed record — or, if the
// first rolled back, executes itself. The consumer's id used again for
// another action or other arguments is a [*KeyReusedError] and changes
// nothing. A call of another consumer, or of another user, never sees the
// key: it is neither replayed nor refused, never waits for it, and learns
// nothing of whether the id was used. Only calls that succeed are
// recorded: a call that fails changes nothing, and a retry executes
// again. Ids are at most [MaxKeyLength] bytes, and kept for
// [KeyRetention] (24 hours) after the call that recorded them; each keyed
// call that executes deletes up to 100 expired keys, oldest first,
// through an index on the expiry time. [Store.Disable] and [Store.Enable]
// are the same calls without a key.
//
// Schema version 3 brought the consumer into the key. A database of
// version 2 is upgraded in place: the idempotency_keys table is added,
// and its invocation_keys table (keys per user) stays, unread, for the
// replicas of the previous release still running during a rolling deploy
// (a session's calls all run on its owner, so each release keeps its own
// sessions' keys). None of its keys is replayed, since none can be told
// to belong to a consumer; drop it once no such replica runs.
//
// # The agent side
//
// [Procedures] returns the in-process [surface.FuncExecutor] exposing
// "devices.list", "devices.disable" and "devices.enable". Each call reads the acting user
// from the host context ([UserFromHost]: host["user"] holds a User) and
// calls the store, which re-checks the user's authority on every call:
// neither the client-side policies nor the confirmation evidence are
// trusted. Domain errors become agent errors with fixed, safe texts:
//
//	no user in the host context  NOT_AUTHENTICATED
//	ErrForbidden                 NOT_AUTHORIZED, details.origin "server"
//	ErrNotFound, ErrInvalid      INVALID_INPUT with details.issues
//	ErrKeyReused                 INVOCATION_CONFLICT, details.reason
//	                             "id-reused-with-different-request"
//	anything else                a plain error: EXECUTION_FAILED transport
//
// "devices.disable" and "devices.enable" pass the invocation id
// (ProcedureCall.InvocationID, which the MCP adapter takes from the tool
// call's _meta) as the idempotency key of the calling consumer
// ([ProcedureOptions].Consumer, by default ProcedureCall.Consumer.Key()),
// so that a retried call executes once even when it reaches another
// replica, and another agent's call with the same id executes on its own.
// An application with a registry per browser session names the session
// in the consumer, as the example's console does:
//
//	domain.Procedures(store, &domain.ProcedureOptions{Consumer: func(call *surface.ProcedureCall) string {
//		return sessionID(call.Host) + " " + call.Consumer.Key()
//	}})
//
// [DisableRef], [EnableRef] and [ListRef] build the procedure references the example's
// UI components list, for instance a table whose live selection is bound
// to the ids of "domain:devices.disable":
//
//	reg.SetProcedureExecutor(domain.Procedures(store, nil))
//	reg.Register(surface.Component{
//		Type:        "devices.table",
//		Description: "Devices table",
//		Procedures:  []surface.Capability{domain.DisableRef(sel.Bind, sel.Describe), domain.ListRef()},
//	})
//
// where sel.Bind returns map[string]any{"ids": the selected ids}.
package domain
