// Package mcpsurface serves an agentsurface registry over the Model Context
// Protocol, with the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A [Server] is one MCP server bound to one registry and one consumer. Its
// tool list is the toolset of that pair ([surface.NewToolset], remote
// topology): one tool per visible capability in direct mode, or the three
// constant meta tools in meta mode. The list follows the registry live:
// mounting, unmounting and availability changes add, replace or remove
// tools, and the SDK sends notifications/tools/list_changed to every
// connected session.
//
//	package main
//
//	import (
//		"context"
//		"log"
//		"log/slog"
//		"os"
//		"sync"
//
//		"github.com/agentsurface/agentsurface/mcpsurface"
//		"github.com/agentsurface/agentsurface/surface"
//		"github.com/modelcontextprotocol/go-sdk/mcp"
//	)
//
//	type Selection struct {
//		IDs []string `json:"ids" jsonschema:"Device ids to select"`
//	}
//
//	func main() {
//		var mu sync.Mutex // handlers run concurrently
//		var selected []string
//		reg := surface.New(nil)
//		defer reg.Close()
//		_, err := reg.Register(surface.Component{
//			Type: "devices.table", InstanceID: "main", Description: "Devices table",
//			Observations: map[string]surface.Capability{
//				"readSelection": surface.Observation(surface.ObservationDef[[]string]{
//					Description: "The selected device ids",
//					Read: func(context.Context, *surface.Call) ([]string, error) {
//						mu.Lock()
//						defer mu.Unlock()
//						return selected, nil
//					},
//				}),
//			},
//			Actions: map[string]surface.Capability{
//				"selectRows": surface.Action(surface.ActionDef[Selection, surface.None]{
//					Description: "Replace the selection", Effect: surface.EffectLocalState,
//					Execute: func(_ context.Context, _ *surface.Call, in Selection) (surface.None, error) {
//						mu.Lock()
//						defer mu.Unlock()
//						selected = in.IDs
//						return surface.None{}, nil
//					},
//				}),
//			},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "claude", Kind: surface.ConsumerMCPBridge},
//			&mcpsurface.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}) // stdout is the transport
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer srv.Close()
//		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
//			log.Print(err)
//		}
//	}
//
// The client then sees the tools view_devices__table__readSelection and
// view_devices__table__selectRows; a call returns the registry's result
// envelope, e.g. {"status":"ok","invocationId":"mcp_…_1",
// "capabilityId":"view:devices.table.selectRows","surfaceVersion":"1"}.
//
// # Tools
//
// Each tool has the toolset's name, description and input schema, and a
// title for people to read, such as "Devices table: select rows"
// ([surface.Tool.Title]), as title and annotations.title. Its annotations
// come from the capability: readOnlyHint for observations and
// server-query procedures; destructiveHint true only for destructive
// capabilities (false for the other effects); idempotentHint from the
// declared idempotency; openWorldHint true only for external side effects.
// The tool's _meta carries "agentsurface/capabilityId", "agentsurface/kind",
// "agentsurface/effect", "agentsurface/available" and, when set,
// "agentsurface/unavailableReason" and "agentsurface/note". The live state
// is part of the definition, so an availability flip pushed by the app
// ([surface.Handle.Update], [surface.Handle.Refresh]) reaches clients as a
// list change. Hints are hints: the registry enforces policy on every call.
//
// Schemas are shown in the form clients map most widely, equivalent to
// the registry's: a type array (["array","null"], which a Go slice a
// program may leave nil gets) as anyOf of one schema per type, and a
// schema that accepts anything as anyOf of the JSON types, so that the
// MCP Inspector's --strict portability lint finds nothing; the registry
// validates as declared.
//
// A call acts on what its session was shown: it resolves against the
// catalog of the last tools/list answered to that MCP session, so a tool
// whose component was replaced or unmounted since is answered
// STALE_CAPABILITY or COMPONENT_UNMOUNTED (even after the tool left the
// list), and a destructive or external-side-effect procedure called after
// a surface change STALE_CAPABILITY surface-version-mismatch. Each such
// change is announced with notifications/tools/list_changed; the client
// lists again and calls. A client is its MCP session; requests without a
// session (over HTTP: 2026-07-28 clients, and every client of a
// stateless handler) are told apart by the credential they present (see
// Confirmations below), so that one client's listing never changes what
// another's calls resolve against. Of those, the catalogs of the 64
// clients of a (registry, consumer) that listed or called last are
// remembered; an older one's calls resolve against the current catalog,
// as those of a client that never listed.
//
// [Options.TraceContext] runs first on every tools/call with the
// request's _meta, so a tracing library continues the client's trace
// (W3C "traceparent" and "tracestate") through the registry into the
// capability's handler.
//
// [Options.Scope] limits discovery, not access: in meta mode
// surface_read and surface_act reach capabilities outside it by id, as the
// toolset defines. Restrict access with policies or the consumer's
// grants.
//
// The SDK does not validate arguments; the registry does, for every
// adapter alike. Tools whose input schema is not a JSON object (which MCP
// cannot express) are left out and logged.
//
// # Results
//
// A call returns the registry's result envelope unchanged, as the text
// content (JSON) and as structuredContent: status, invocationId,
// capabilityId, output or error {code, message, retry, details},
// surfaceVersion, surfaceChanged. Each tool declares that envelope as its
// outputSchema, with the capability's own output schema under "output"
// (its $defs moved to the root; any value for the meta tools), and every
// structuredContent validates against it, error results included. A
// failed capability call is a normal result with isError set, never a
// protocol error, so the model can read the code and recover. Protocol
// errors are the SDK's (malformed requests, unknown tools), a request
// state that does not verify (-32602), and what a handler asks for with
// [MissingClientCapability].
//
// A panic in the code a call runs (the registry and, through it, the
// application's decoders, encoders, handlers and policies) never takes
// the process down: the call answers EXECUTION_FAILED with reason
// "handler-error" and the code's fixed message, and the panic value and
// stack go to [Options.Logger] only. A panicking [Resolver] fails its
// HTTP request with 500 and a log line.
//
// Invocation ids are minted per call ("mcp_<server>_<n>"), unique across
// servers and sessions. A client that wants idempotent retries sends its
// own id in the request's _meta field "agentsurface/invocationId"; the
// registry scopes idempotency keys by consumer.
//
// # Confirmations
//
// Capabilities that require the user's approval answer
// CONFIRMATION_REQUIRED (isError, with details.confirmationId and
// details.summary). The user approves or denies in the application
// ([surface.Confirmations.Resolve]), and the agent calls again:
//
//   - in meta mode, surface_act with "confirmationId" (and the same
//     "invocationId", if it sent one), as the toolset defines;
//   - in direct mode, where tool schemas stay exactly the capability's,
//     the confirmation id travels in the request's _meta field
//     "agentsurface/confirmationId" ([MetaConfirmationID]); or the agent
//     simply calls the same tool again with the same arguments (and no
//     _meta invocation id): the server's toolset remembers the
//     confirmations it issued, per client, tool and canonical arguments,
//     and presents the pending or approved one itself
//     (surface.ToolsetOptions.RememberConfirmations). Either way the
//     retry targets the registration the confirmation was issued for and
//     reuses the first call's invocation id, so it executes at most once;
//     once settled, an identical call is a new request. A retry that
//     found the effective input changed since the approval
//     (CONFIRMATION_INVALID mismatch: a bound selection moved) executes
//     nothing and leaves the approval standing; the next retry gets an
//     invocation id of its own, so that it is judged on its effective
//     input then.
//
// Presenting a remembered confirmation grants nothing by itself: the
// registry executes only if that exact request (registration, capability,
// consumer, client, effect, effective input) was approved, as for any
// evidence.
//
// A confirmation binds to the client that asked for it, not only to the
// consumer, so that a user's second MCP client, which a resolver maps to
// the same registry and consumer, can neither spend the approval the
// user gave to the first client's request nor be handed it: its
// identical call asks for an approval of its own, and presenting the
// first client's confirmation id fails CONFIRMATION_INVALID mismatch. A
// client is its MCP session; a request without a session (session-less
// over HTTP: 2026-07-28 clients, and every client of a stateless handler)
// is told apart by the credential it presents (its Authorization header),
// so two session-less clients sharing one credential are one client. A
// stateful client that reconnects with a new session presents its
// confirmations no more: it asks again.
//
// With [Options.Elicit], clients that advertise form elicitation are asked
// directly: the first call returns an input request ("confirm", a form
// with one boolean "approve") and an HMAC-signed request state holding the
// confirmation id, invocation id, tool, registration and a digest of the
// arguments. The SDK answers it — natively on 2026-07-28 sessions, through
// elicitation/create on older ones — and calls the tool again with the
// answer. The server verifies the state (a retry whose state was not
// issued by this server for this tool and these arguments is refused
// with a JSON-RPC invalid-params error, as SEP-2322 asks), resolves the
// registry's record (approve, or deny on decline and cancel) and retries
// with the evidence;
// a denial comes back as CONFIRMATION_INVALID, reason "denied". A decline
// never executes, even when the record was approved elsewhere meanwhile.
// The client application answers elicitations, so this is
// client-mediated approval: the client can approve on the user's behalf.
// Use it with trusted clients only, and keep two-phase (the default)
// whenever approval must come from the host application's own UI. Clients without
// elicitation, and stateless HTTP sessions on protocols older than
// 2026-07-28, get two-phase.
//
// An older client is asked while its tool call waits. The wait ends when
// the confirmation expires, at the latest (the call then returns
// CONFIRMATION_INVALID, reason "expired", and the record is expired so a
// late answer approves nothing), and at once on [Server.Close],
// [HTTPHandler.Close] or the session's DELETE (the call returns
// CANCELLED). A 2026-07-28 client answers in a new request: the server
// holds nothing meanwhile.
//
// # Approve page and links
//
// Most clients cannot show a server's question, and a form answered by
// the client is only as trustworthy as the client. With
// [Options.ApproveURL] the application gives, for a pending
// confirmation, the address of its own approve page, where the person,
// signed in, sees the exact input and approves or denies (resolving the
// same registry record: digest binding, single use, TTL, audit). Each
// client then reaches the person in the first way it supports:
//
//   - URL-mode elicitation, for a client that declares elicitation.url
//     (2025-11-25: elicitation/create with mode "url", an elicitationId,
//     the link and a message naming the summary; 2026-07-28: the same as
//     an input request of the first round). The client only opens the
//     page: its "accept" means the person went there, and the call then
//     waits (the older client's tools/call, or the 2026-07-28 client's
//     second round) for the decision on the page, until the confirmation
//     expires at the latest, and on [Server.Close], [HTTPHandler.Close]
//     or the session's DELETE at once (CANCELLED). It then goes on as
//     any approved confirmation does (or answers CONFIRMATION_INVALID
//     denied or expired), and an older client gets
//     notifications/elicitation/complete with the elicitationId. A
//     decline or cancel resolves nothing: the call answers at once with
//     the CONFIRMATION_REQUIRED of the still pending confirmation and its
//     link. URL mode needs no trust in the client, so it needs no Elicit;
//     [Options.NoURLElicitation] turns it off. Each URL elicitation sent
//     is logged (info, with the confirmation and elicitation ids; never
//     the link, which may carry a token).
//   - A form, as above, with Elicit only.
//   - For every other client, CONFIRMATION_REQUIRED carries the link:
//     details.approveUrl ([surface.Error.ApproveURL]) and a message that
//     asks the agent to hand it to the user ("Ask the user to approve
//     this call at <link> and retry with the confirmationId once
//     approved."); the default instructions say so too.
//
// Who resolved through which page is the page's to record
// ([surface.Resolution].Channel: [surface.ChannelURL] for a page opened
// by elicitation, [surface.ChannelLink] for the link). Without
// ApproveURL, answers are byte for byte what they were.
//
// # HTTP
//
// [NewHTTPHandler] serves Streamable HTTP for many user sessions at once,
// to clients of both protocol generations from one endpoint: clients up
// to 2025-11-25 get stateful sessions (initialize, Mcp-Session-Id),
// clients of 2026-07-28 and later are served session-less (each request
// carries its protocol version, identity and capabilities; change
// notifications travel on their subscriptions/listen stream), and
// server/discover lists every revision served.
// A [Resolver] maps each request to its registry and consumer (a pairing
// or bearer token, a cookie); a resolver error is answered 401 before the
// SDK sees the request. One Server per (registry, consumer) is created on
// first use and cached, and both generations reach it. Stateful MCP
// session ids are bound to that pair, so a request can never reach a
// session, and therefore a registry, that its credentials do not resolve
// to.
//
//	h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
//		s, ok := sessions.ByPairingToken(bearer(r))
//		if !ok {
//			return nil, surface.Consumer{}, errors.New("unknown token")
//		}
//		return s.Registry, surface.Consumer{ID: s.UserID, Kind: surface.ConsumerMCPBridge}, nil
//	}, nil)
//	defer h.Close()
//	mux.Handle("/mcp", h)
//
// Everything a server lists or reads (tools/list and the other lists,
// resources/read, server/discover) depends on the consumer and is marked
// cacheScope "private", so no shared cache serves one user's tools to
// another; lists are in name order, the same on every request. Tool call
// results carry no cache hints.
//
// What a client opens is bounded and reclaimed. A stateful session with
// no request in progress for [HTTPOptions.SessionTimeout] (default 30
// minutes) is closed, whether or not the client sent DELETE. At most
// [HTTPOptions.MaxSessions] (default 32) sessions are open per (registry,
// consumer), and an abandoned one never locks its credential out: when a
// new session would exceed the cap, the idle session (no request in
// progress, no open stream) idle the longest is closed to make room, and
// a later request on it gets 404. Only when every session is busy is the
// new one refused, with 429 Too Many Requests and a JSON-RPC error of
// code [CodeTooManySessions], so one credential cannot exhaust the
// server. Requests that open no session (probes, 2026-07-28 requests)
// take no slot; a 2026-07-28 client's subscriptions/listen streams are
// capped at MaxSessions alike. A Server with no session and no request
// for [HTTPOptions.IdleTimeout] (default 30 minutes) is closed and
// dropped, with what it held. When a session's registry closes, its
// servers go on their next request or sweep; [HTTPHandler.Forget] drops
// them at once. [HTTPHandler.Stats] counts what a handler holds open
// (servers, stateful sessions, listen streams) and what it refused or
// reclaimed, for an application's metrics.
//
// # Beyond tools
//
// [Options.ToolNames] gives tools names of the application's choice,
// [Options.Content] adds content blocks (an image, a resource) to a
// result, and [Options.Extend] adds the application's own prompts,
// resources and resource templates, with completions and resource
// subscriptions, to every server this package creates.
//
// A capability's handler that knows it serves MCP clients can reach what
// only MCP has: [RequestFromContext] gives the tools/call request and its
// session (progress notifications, log messages, requests to the client),
// [InputRequired] and [Input] ask the client for input over several
// rounds (elicitation, sampling, roots; signed request state), and
// [MissingClientCapability] refuses a client that lacks a capability the
// call needs. Under other adapters these do nothing MCP-specific.
//
// # Authorization
//
// For a deployment where users sign in with an authorization server, put
// the handler behind go-sdk's bearer-token verification and serve its
// protected-resource metadata (RFC 9728), from which MCP clients discover
// where to get a token:
//
//	mux.Handle("/.well-known/oauth-protected-resource", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
//		Resource: "https://app.example.com/mcp", AuthorizationServers: []string{"https://auth.example.com"},
//	}))
//	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
//		ResourceMetadataURL: "https://app.example.com/.well-known/oauth-protected-resource",
//	})(h))
//
// A request without a valid token is refused there, before this package
// sees it. The resolver reads the verified user with
// auth.TokenInfoFromContext(r.Context()).UserID; stateful sessions are
// then also bound to that user by the SDK (another user's request gets
// 403).
//
// The token says who; the resolver must still say which of the user's
// live sessions (pages, registries) the agent acts on. The rule this
// package recommends, and Example (Authorization) implements: the user
// pairs one of their pages with their agent in the application ("use with
// my agent"), and every request of that user goes to the page paired last;
// a request that names a page by the pairing token shown on it (a header
// such as Mcp-Pairing-Token) goes to that page instead, if it is the
// user's own. It is never a guess (not "the most recent tab"), so an agent
// cannot drift to a page the user did not choose. A user with no paired
// live page gets [ErrNoSession] (403). Pairing another page moves the
// agent: the stateful session on the old page ends (its id gets 404) and
// the client's next session, or next 2026-07-28 request, acts on the new
// one. Without an authorization server, the pairing token alone is the
// credential, as in the devices demo.
//
// # Concurrency
//
// Servers and handlers are safe for concurrent use. The tool list is
// updated on the goroutine that changed the registry (the registry's event
// delivery). A Server starts no goroutine; an HTTPHandler keeps one timer
// for its sweep while it caches servers. The SDK sends change
// notifications from a timer of its own, 10 ms after a change. Close ends
// the calls in progress and the connected sessions, cancels a scheduled
// notification and waits for one being sent; nothing started outlives
// it, and nothing is logged or sent for a closed Server.
package mcpsurface
