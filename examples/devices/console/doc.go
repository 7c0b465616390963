// Package console is the devices console: a server-rendered web
// application whose live state AI agents operate through agentsurface,
// with a human approving what matters in the page. It is an application
// of package webhost, which does for it what any Go web application
// adopting agentsurface needs: the per-browser sessions and their
// credentials, the page lifecycle, the live fragments' event stream and
// page script, the MCP and WebMCP endpoints, the approvals inbox, the
// guard, the probes and the replicas. What is here is the devices
// console itself: its views, its page and forms, its activity feed and
// agent console, and its wiring to the domain service.
//
// An [App] is an http.Handler. It serves the page (html/template and
// embedded assets: the page's own script only syncs the agent form), its
// form posts under /ui/, and everything webhost serves: the event stream,
// the approval posts, join links and WebMCP under /agentsurface/, the MCP
// endpoint /mcp, and /healthz and /readyz. Run it with the CLI: go run
// ./cmd/agentsurface demo.
//
// # One registry per browser session
//
// Each browser session ([Session]) has its own [surface.Registry] and its
// own view state, held on the server. The page's views register their
// components while a page shows them ([Session.Mount], under the mount's
// context) and unregister them when the page has been closed for the
// grace period (views.go):
//
//   - devices.table, instance "main": readState; selectRows,
//     clearSelection, setFilter, sortBy, openDevice (navigation); and the
//     domain procedures bound to the live selection: devices.disable
//     (destructive, the selected ids locked, confirmation required, with
//     the devices named in the approval card, standing grants allowed
//     within [DisableGrants]), devices.enable and devices.list;
//   - devices.detail, instance id = the device id: readDevice and close.
//
// When the state behind a When predicate changes (the selection), the
// view calls Refresh on its handle so that availability flips reach
// agents; what the page shows follows through [webhost.Session.Changed],
// fragment by fragment (render.go). A domain write (a procedure that
// changed devices) reaches every session through webhost.Host.Notify,
// on this replica and the others.
//
// # Agents
//
// Remote agents connect to /mcp with the session's bearer token
// ([Session.Token]), with two-phase confirmations answered in the page. An
// agent in the user's own browser gets the session's tools through
// WebMCP (webhost's page script offers them on document.modelContext),
// as [WebMCPConsumer], its calls that need approval waiting for the
// click. The page's embedded agent console runs an [agent.Runner] (by
// default the scripted agent; a model loop with Options.Agent) over the
// session's toolset in the embedded topology, where a call that needs
// approval waits for the user's click. Either way, calls refer to the
// catalog the agent was last shown, so a tool whose component unmounted
// or was replaced answers COMPONENT_UNMOUNTED or STALE_CAPABILITY.
//
// An MCP agent's call that needs approval reaches the person wherever
// they are (webhost's approve page): a client that declares URL-mode
// elicitation opens the approve page for them, any other gets the
// approve link in CONFIRMATION_REQUIRED to hand them; either way they
// decide on the exact input, signed in as the session's user (here: in
// a browser of the session), and the agent's call goes on.
//
// The approvals card is the console's rendering of webhost's approvals
// fragment: the devices by name, the exact input, and for every decision
// what became of it (the call it let through, a refusal by the domain
// service, or that the request expired unanswered). With a disable it
// offers "approve, and allow this for N minutes for these devices"
// (webhost's offer, the approve page's too): a standing grant, within
// [DisableGrants], that lets the same agent disable some of the same
// devices with the same reason without asking. The Grants card lists
// the session's active grants, their terms in plain words and the calls
// left, with Revoke; a call a grant let through says so in the Activity
// card and in its result (grantId).
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
// The Activity card shows the session's audit records and its reads
// (observations are audited only when they fail before reaching the
// component; either way a read is one line), newest first.
//
// # Host API
//
// Tests and the CLI drive sessions without a browser: [App.NewSession]
// (also again from the [webhost.Credentials] of an earlier run),
// [Session.Decide] to approve or deny as a given actor, [Session.Ask] for
// the embedded agent, [Session.PlayScripted] to run the scripted agent
// over MCP. Options.Host configures webhost: bounds, timeouts, allowed
// hosts, replicas (package webreplica, wired by the caller: this package
// imports neither package replica nor a database driver).
package console
