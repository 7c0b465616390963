// Package webhost binds agentsurface registries to the users of a Go web
// application: one session per browser, with its own [surface.Registry]
// and the application's view state; the components a page shows mounted
// while it shows them; the page's live fragments kept up to date; an MCP
// endpoint and WebMCP for agents, an approvals inbox for the user; and
// the guard every route of the application needs (the Host check against
// DNS rebinding, session flood bounds, security headers, body limits).
//
// The application writes three things: its per-session views ([Views]:
// the components a page mounts, the HTML of its live fragments), how a
// session's registry is configured (policies, limits, telemetry, a
// procedure executor), and its own routes, wrapped by the [Host]:
//
//	package main
//
//	import (
//		"context"
//		"html/template"
//		"io"
//		"log"
//		"net/http"
//		"sync"
//
//		"github.com/agentsurface/agentsurface/surface"
//		"github.com/agentsurface/agentsurface/webhost"
//	)
//
//	// notes is one session's notes board.
//	type notes struct {
//		s     *webhost.Session
//		mu    sync.Mutex
//		items []string
//	}
//
//	type note struct {
//		Text string `json:"text" jsonschema:"The note"`
//	}
//
//	func (n *notes) list() []string {
//		n.mu.Lock()
//		defer n.mu.Unlock()
//		return append([]string(nil), n.items...)
//	}
//
//	func (n *notes) add(text string) {
//		n.mu.Lock()
//		n.items = append(n.items, text)
//		n.mu.Unlock()
//		n.s.Changed("notes") // the page's fragment follows
//	}
//
//	// Mount registers what the page shows, for as long as it shows it.
//	func (n *notes) Mount(ctx context.Context, s *webhost.Session) error {
//		_, err := s.Registry().RegisterContext(ctx, surface.Component{
//			Type: "notes.board", Description: "The user's notes",
//			Observations: map[string]surface.Capability{
//				"read": surface.Observation(surface.ObservationDef[[]string]{
//					Description: "Read the notes",
//					Read:        func(context.Context, *surface.Call) ([]string, error) { return n.list(), nil },
//				}),
//			},
//			Actions: map[string]surface.Capability{
//				"add": surface.Action(surface.ActionDef[note, surface.None]{
//					Description: "Add a note", Effect: surface.EffectLocalState,
//					Confirmation: surface.ConfirmRequired, // the user approves in the page
//					Execute: func(_ context.Context, _ *surface.Call, in note) (surface.None, error) {
//						n.add(in.Text)
//						return surface.None{}, nil
//					},
//				}),
//			},
//		})
//		return err
//	}
//
//	// Fragment renders the page's live fragment "notes".
//	func (n *notes) Fragment(_ context.Context, w io.Writer, id string) error {
//		if id != "notes" {
//			return webhost.ErrNoFragment
//		}
//		return page.ExecuteTemplate(w, "notes", n.list())
//	}
//
//	var page = template.Must(template.New("page").Parse(`<!doctype html>
//	<html><head><title>Notes</title>{{.Script}}</head><body>
//	<ul id="notes" data-fragment>{{template "notes" .Notes}}</ul>
//	<div id="agentsurface-approvals" data-fragment></div>
//	<p>Agent token: <code>{{.Token}}</code></p>
//	</body></html>
//	{{define "notes"}}{{range .}}<li>{{.}}</li>{{end}}{{end}}`))
//
//	func main() {
//		h, err := webhost.New(webhost.Options{
//			NewViews: func(s *webhost.Session) (webhost.Views, error) { return &notes{s: s}, nil },
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer h.Close()
//		mux := http.NewServeMux()
//		mux.Handle("GET /{$}", h.Page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//			s := webhost.SessionFrom(r.Context())
//			_ = page.Execute(w, map[string]any{"Script": h.Script(), "Notes": s.Views().(*notes).list(), "Token": s.Token()})
//		})))
//		log.Fatal(http.ListenAndServe("127.0.0.1:8080", h.Handler(mux)))
//	}
//
// An agent given the page's token (claude mcp add --transport http notes
// http://127.0.0.1:8080/mcp --header "Authorization: Bearer …") sees
// the tools view_notes__board__read and view_notes__board__add; its call
// of add shows an approval card in the page, and once the user approved,
// its retry adds the note, which the page shows without a reload.
//
// # Sessions
//
// A [Session] is one browser's: a random HttpOnly, SameSite=Lax cookie
// names it, [Session.Token] is its MCP bearer token and
// [Session.JoinPath] a link that binds another browser to it. Its public
// id ([Session.ID]) is random and unrelated to these credentials, which
// are looked up by their SHA-256 and never logged. With [Options.User]
// a session belongs to the signed-in user of the application's own
// login, and a request of another user never reaches it.
//
// Sessions are bounded. A visitor's first page makes a session that
// stays unused, in a pool of [Options.MaxUnusedSessions] reclaimed after
// [Options.UnusedTimeout], until the page's script uses it: requests
// without a cookie cannot, by their number, use up the sessions or the
// memory. [Options.MaxSessions] bounds the sessions in use; beyond it
// the one idle the longest without an open page makes room, and only
// when every one has an open page is a new visitor refused.
// [Options.IdleTimeout] ends a session nobody uses. [Host.NewSession]
// makes a session without a browser (tests, a scripted agent).
//
// A session can outlive its process: an application that keeps its
// [Session.Credentials] (the hashes of its secrets, never the secrets)
// makes it again in its next run with [SessionOptions].Credentials, and
// the agent configured with its token, the link handed out and a page
// left open (which reconnects on its own) reach it again.
//
// # Pages and live fragments
//
// A route wrapped in [Host.Page] serves a page: it finds or makes the
// request's session, mounts its views, and hands the session to the
// handler ([SessionFrom]). The page includes the page script
// ([Host.Script]) and marks its live fragments: elements with an id and
// the data-fragment attribute. The script opens the session's event
// stream; while it is open the page is shown, the views stay mounted,
// and [Session.Changed] re-renders the fragments a change touched
// ([Views.Fragment]): each stream renders at most every 100ms, only the
// fragments marked changed, and sends only those whose HTML differs, so
// a burst of changes costs one render. When the last stream of a
// session has closed for [Options.PageGrace] the views unmount: the
// context given to [Views.Mount] ends and the components registered with
// it go, so agents see the page's capabilities exactly while a page
// shows them. A navigation (a panel opening) registers and unregisters
// under that same context; the surface follows it live for agents (MCP
// notifies list changes), and the page follows Changed.
//
// Pages are plain HTML from any renderer (html/template, templ, htmx or
// Datastar pages). Forms marked data-post are posted in the background
// by the script; their routes are wrapped in [Host.Action], which needs
// the request's live session and refuses cross-origin requests, and
// answer with [Host.Posted]. When the server is unreachable the script
// shows a banner and reconnects when it answers again; when the session
// ended (a restart, an expiry) it loads the page again, backing off, and
// the page gets a fresh session. It never leaves the browser on its own
// error page. At most [Options.MaxStreams] streams (tabs) follow one
// session; a newer one pushes the oldest out. A stream that cannot be
// written within [Options.WriteTimeout] is cut.
//
// # Agents
//
// The MCP endpoint ([MCPOptions], "/mcp") serves every session with one
// mcpsurface.HTTPHandler, to clients of both protocol generations: the
// bearer token picks the session, anything else is 401, and stateful MCP
// sessions are bound to it. Calls resolve against the tools the agent
// was last shown. With [MCPOptions.OAuth] the endpoint instead needs an
// OAuth bearer token (go-sdk's auth package) and an agent acts on a
// session of its verified user, never another user's: the one the user
// paired with [Session.PairAgent], or the one it names by token in a
// header.
//
// An MCP client's call that needs approval reaches the person through
// the approve page (below): the Host is the endpoint's
// mcpsurface ApproveURL hook ([Host.ApproveURL]) unless
// Options.MCP.HTTP sets one. A client that declares URL-mode elicitation
// is sent to the page, and its call completes once the person decided
// there; any other client's CONFIRMATION_REQUIRED carries the link
// (details.approveUrl, and the message), for the agent to hand to the
// person. The link is absolute: under [Options.PublicURL], or, without
// it, under the scheme and Host of the MCP request (the Host header the
// guard admitted, never a forwarding header); set PublicURL behind a
// proxy that terminates TLS.
//
// An agent in the user's own browser gets the session's tools through
// WebMCP ([WebMCPOptions]): where the browser has a model context
// (document.modelContext; navigator.modelContext in earlier drafts) the
// page script offers exactly the tools available now, replaces them as
// they change, and runs their calls through the session's registry (as
// consumer webmcp:browser), with the same policies, staleness and
// confirmations as MCP clients; a call that needs approval waits for
// the user's click in the page.
//
// # Approvals
//
// A call that needs the user's approval (CONFIRMATION_REQUIRED) shows in
// the session's approvals: [Session.Pending], and the live fragment
// [ApprovalsID], the Host's default card (or [Options.RenderApprovals]):
// the capability, who asks, the exact input, Approve and Deny, when it
// expires. The card posts to [Host.DecidePath], which decides only a
// confirmation pending in the request's own session; [Session.Decide]
// does the same from code. [Session.Decisions] lists the decisions with
// what became of each: the call the approval let through, as the
// registry settled it, or that the request expired unanswered. A request
// whose component unmounted expires at once: no approval could let it
// through any more. Every channel resolves the same registry record, so
// an approval is bound to the exact input, single use and short-lived
// whoever gives it.
//
// A user who is not looking at the page decides on the approve page:
// one request, its summary, who asks, the exact input, when it expires,
// Approve and Deny (the default page, or [Options.RenderApprove]). It
// decides only on a same-origin POST, never on GET, and never takes the
// agent's MCP bearer token. The session's own browser opens it with its
// cookie ([Host.ApprovePath]). Elsewhere, a signed approve link opens
// it: an HMAC, with a key of this process, over the request's id, the
// session, its user and a digest of the request as it is pending (its
// capability, registration, consumer, effect, exact input and expiry).
// A link lives as long as its request, decides it once, and binds the
// browser to nothing. The link handed to the agent ([Session.ApproveURL],
// or [Host.ApproveURL] from the request alone, for an MCP adapter's
// URL-mode elicitation or CONFIRMATION_REQUIRED) opens only for the
// session's user: signed in as that user with [Options.User], else in a
// browser of the session; so the agent, which holds it, cannot approve
// its own call, and a person clicks. The link the notifier sends the
// user directly opens on any device (with Options.User, signed in).
// Decisions record how the person was reached: surface.ChannelPage (the
// card, or the page with the cookie), ChannelLink (the agent's link),
// ChannelURL (that link opened by URL-mode elicitation, which adds
// via=url: unsigned, it only labels the audit trail), ChannelWebhook
// (the notifier's link). With several replicas, a link names its session
// by its public id, which the session's owner claims with its
// credentials, so any replica forwards it to the owner, which alone
// verifies it. A forged, mistyped or other session's link is answered
// like an unknown request (404); a genuine one opened by someone it is
// not for gets 401 or 403, a used or expired one 410; each refusal is
// logged at warn, without the link, and counted ([Stats].Refused), and
// one about a request of a session (a genuine link, a post that decides
// nothing) is recorded in the session's audit trail too
// ([AuditApproveRefused]).
//
// Where the capability allows standing grants (surface.GrantRule), the
// page also offers "approve, and allow this for N minutes": a grant for
// the asking consumer alone, within the capability's ceiling (its
// longest TTL, its most uses), for inputs that set the approved input's
// members and no other, each holding only values the approved input held
// ([GrantOffer]). The Host derives the grant from the request, never
// from the form, which picks only among the durations offered. The
// approvals card offers the same grant ([Session.GrantOffer],
// [Approvals].Offers; its form posts decision "grant" and the minutes to
// [Host.DecidePath]).
//
// [Options.Notifier] tells the user of each request out of band, with
// its approve link (set [Options.PublicURL] for absolute links):
// [SlackWebhook] posts it to a Slack-style incoming webhook. Its calls
// run in the background, each bounded by a deadline, at most
// MaxConcurrent at once, a panic recovered; a call, a page or Close never
// waits on a notifier that hangs (Close waits at most its Timeout).
//
// # What protects the application
//
// [Host.Handler] puts every route, the application's included, behind
// the guard: a request naming a host that is not loopback nor in
// [Options.AllowedHosts] is answered 421 before anything else is done, so
// a page on another domain whose name resolves to the server reaches
// nothing, not even a new session; bodies are capped at
// [Options.MaxBodyBytes] and must arrive within [Options.ReadTimeout];
// every answer forbids framing, sniffing and referrers and carries a
// strict Content-Security-Policy ([DefaultContentSecurityPolicy]).
//
// What the application must still do: authenticate its users and pass
// them as [Options.User] where sessions must belong to users; wrap every
// route that changes a session's state in [Host.Action] (never a GET);
// show a session's token and join link only to its user; re-check in its
// domain services (the procedure executor) that the user may do what an
// agent asks, whatever the page allowed; and keep [Options.AllowedHosts]
// to the names it is really reached by.
//
// # Replicas, probes and metrics
//
// With [Options.Replicas] (package webreplica) the application runs as
// several replicas behind a load balancer without stickiness: each
// session lives on the replica that made it, and every request naming it
// (by cookie, bearer token or join link) is forwarded there. [Host.Notify]
// tells every replica's sessions about an application write; views that
// implement [Listener] hear it. The Host starts the replicas in New and
// stops them in Close, after its sessions ended.
//
// The Host answers liveness at [Options.HealthPath] and readiness at
// [Options.ReadyPath]; [Host.Drain] makes readiness fail before Close.
// [Host.Stats] returns its gauges and counters (sessions, streams,
// refusals by reason) for the application's metrics system.
//
// # Concurrency
//
// A Host and its Sessions are safe for concurrent use. The Host never
// calls the application's code (Options' funcs, Views, Listener) while
// holding a lock of its own. Its goroutines (a sweeper, notifications,
// the page grace timers, the notifier's calls) end before Close returns,
// but for a notifier call that ignores its context past
// Options.Notifier.Timeout, which Close abandons with a log line; an
// event stream runs on its request's goroutine and ends when the session
// does.
package webhost
