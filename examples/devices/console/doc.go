// Package console is the devices console: a server-rendered web
// application whose live state AI agents operate through agentsurface,
// with a human approving what matters in the page.
//
// An [App] is an http.Handler. It serves the page (html/template and
// embedded assets), its event stream (server-sent events with a small
// script of its own, no build step), its form posts, the MCP endpoint
// /mcp and the WebMCP endpoints /webmcp/tools and /webmcp/call. Run it
// with the CLI: go run ./cmd/agentsurface demo.
//
// # One registry per browser session
//
// Each browser session ([Session], a random HttpOnly, SameSite=Lax cookie)
// has its own [surface.Registry] and its own view state, held on the
// server. The page's views register their components while they are on
// screen and unregister them when they go away (views.go):
//
//   - devices.table, instance "main": readState; selectRows,
//     clearSelection, setFilter, sortBy, openDevice (navigation); and the
//     domain procedures bound to the live selection: devices.disable
//     (destructive, the selected ids locked, confirmation required, with
//     the devices named in the approval card), devices.enable and
//     devices.list;
//   - devices.detail, instance id = the device id: readDevice and close.
//
// When the state behind a When predicate changes (the selection), the
// view calls Refresh on its handle so that availability flips reach
// agents. The page is open while its event stream is; when the last
// stream of a session ends and none returns within Options.PageGrace, the
// views unmount; an idle session expires after Options.IdleTimeout, with
// its registry, MCP sessions and token.
//
// # Agents
//
// Remote agents connect to /mcp with the session's bearer token
// ([Session.Token]): an mcpsurface server over the session's registry,
// with two-phase confirmations answered in the page. The page's embedded
// agent console runs an [agent.Runner] (by default the scripted agent; a
// model loop with Options.Agent) over the session's toolset in the
// embedded topology, where a call that needs approval waits for the
// user's click. Either way, calls refer to the catalog the agent was last
// shown, so a tool whose component unmounted or was replaced answers
// COMPONENT_UNMOUNTED or STALE_CAPABILITY ([surface.Catalog]).
//
// The page's Live surface card lists what the page's agent may use,
// from [surface.Registry.Explain]: a capability that a policy
// ([Options.Policies]) hides is struck out and tagged with the policy, its
// layer and its vote, and a disabled one shows the policy's reason. The
// explanation is for the person at the page: no agent-facing endpoint
// (MCP, WebMCP tools, the embedded toolset) serves it. An agent that reads
// the screen instead of using the surface sees it, as it sees the rest of
// the page; an application where that matters keeps such a card on an
// operator's page.
//
// # WebMCP
//
// An agent in the user's own browser gets the session's tools through
// WebMCP, the proposed browser API for pages to offer tools
// (webmcp.go). The page's script feature-detects a model context
// (document.modelContext, or navigator.modelContext of earlier drafts);
// without one it does nothing. With one, its event stream
// (/events?webmcp=1) carries the tools to offer — exactly the tools available now to
// [WebMCPConsumer], each with its wire name, description and input schema
// — at once and whenever they change, and the page replaces what it
// offers with them (registerTool with an abort signal, or unregisterTool,
// or provideContext, whichever the browser has). GET /webmcp/tools
// answers the same list. A tool's execute posts to /webmcp/call, which
// runs the call through the session's toolset and the catalog the tool
// came from, so policies, availability, staleness and confirmations
// apply as for MCP clients, and answers the result envelope, which the
// page returns to the agent. A call that needs approval waits for the
// user's click in the page.
//
// # What protects the page
//
// Every route first checks the Host header: only the loopback names and
// Options.AllowedHosts are served, so that a web page whose domain is made
// to resolve to the console (DNS rebinding) reaches nothing, not even a
// new session ([App.Guard]). Answers forbid framing, sniffing and
// referrers, and the page runs only its own script (a strict Content
// Security Policy). Forms and WebMCP calls refuse cross-origin posts.
// Request bodies must arrive within Options.ReadTimeout.
//
// A visitor's first page makes a session that stays unused, in a bounded
// pool reclaimed after Options.UnusedTimeout, until the page uses it (its
// event stream, a form, the join link, the MCP token): requests without a
// cookie cannot, by their number, use up the sessions or the memory. The
// sessions in use are bounded by Options.MaxSessions, the open streams of
// one session by Options.MaxStreams. The public session id shown on the
// page is random, unrelated to the cookie, the token and the join code;
// secrets are looked up by their SHA-256 (sessions.go).
//
// # Replicas
//
// With Options.Replica ([Replica], package replica) the console runs as
// one of several replicas behind a load balancer without stickiness, on
// one PostgreSQL database and one domain store. A session lives on the
// replica that made it (its owner), in memory as in one process; what
// the replicas share is in Postgres:
//
//   - every session's tokens — the cookie, the MCP bearer token, the
//     join code — are claimed in the session directory before they are
//     handed out, and released when the session ends (closed, expired,
//     reclaimed from the unused pool, pushed out); a claim that fails
//     answers the visitor 503 with Retry-After and a page that loads
//     itself again, and the host API [ErrUnavailable];
//   - the App's handler checks the Host header first, then forwards each
//     request to its session's owner: the page, the event stream
//     (streamed), the form posts and approvals, the WebMCP endpoints and
//     /mcp of both protocol generations name their session by the cookie,
//     the bearer token (/mcp) or the path (/join/{code}). The owner
//     authenticates the token as it would alone, and sets the answer's
//     security headers. A session no live replica owns is answered where
//     the request landed, as an ended one: /mcp 401, the event stream 410,
//     the forms 401, the join link 404, the page a fresh session. A
//     replica that cannot reach a live owner answers 503 with Retry-After
//     (the page: one that loads itself again);
//   - each session's audit records go to Replica.Audit (agentsurface_audit,
//     the session's public id in the session column) as well as to the
//     page's Activity card, never blocking a call;
//   - a domain write (a procedure that changed devices) refreshes this
//     replica's sessions and is broadcast through Replica.Notifier
//     ([NotifyChannel]); the other replicas refresh theirs
//     ([App.DevicesChanged], through [Replica.Notified]).
//
// When a replica stops ([App.Close], then the directory's Close) or loses
// its lease ([App.EndSessions], through [Replica.LeaseLost]), its
// sessions end for every replica: the pages' event streams end ("ended"
// event, or a 410 when they reconnect), and the page's script loads the
// page again, which starts a fresh session on whichever replica serves
// it. The reloads back off (1s, 2s, 4s … 30s, jittered, counted across
// reloads in sessionStorage), so a failing console is never hammered.
// MCP clients get 401 for the ended session and need its successor's
// token, as after any session end. [Replica] shows the wiring.
//
// # Host API
//
// Tests and the CLI drive sessions without a browser: [App.NewSession],
// [Session.Decide] to approve or deny as a given actor, [Session.Ask] for
// the embedded agent, [Session.PlayScripted] to run the scripted agent
// over MCP.
package console
