package mcpsurface

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/agentsurface/agentsurface/internal/version"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Keys of the _meta fields this package reads from tool calls.
const (
	// MetaConfirmationID carries, in a tools/call request's _meta, the
	// confirmationId of an approved CONFIRMATION_REQUIRED (direct mode; in
	// meta mode surface_act has a confirmationId argument).
	MetaConfirmationID = "agentsurface/confirmationId"
	// MetaInvocationID carries, in a tools/call request's _meta, the
	// client's invocation id (idempotency key) for the call.
	MetaInvocationID = "agentsurface/invocationId"
)

// Keys of the _meta fields this package writes on tools.
const (
	MetaCapabilityID      = "agentsurface/capabilityId"
	MetaKind              = "agentsurface/kind"
	MetaEffect            = "agentsurface/effect"
	MetaAvailable         = "agentsurface/available"
	MetaUnavailableReason = "agentsurface/unavailableReason"
	MetaNote              = "agentsurface/note"
)

// The server instructions sent to clients when Options.Instructions is
// empty, in direct and in meta mode.
const (
	instructionsBase = "Tools act on the user's live application. " +
		"Tool results are JSON envelopes {status, invocationId, capabilityId, output | error, surfaceVersion}. " +
		"On error, read error.code and error.retry: after-refresh means list the tools again. " +
		"CONFIRMATION_REQUIRED means the user must approve in the application (tell them error.details.summary), "
	directInstructions = instructionsBase + "then call the same tool again with the same arguments."
	metaInstructions   = instructionsBase + "then call surface_act again with the same input and the confirmationId."
	// linkInstructions follow either when Options.ApproveURL is set.
	linkInstructions = " When error.details.approveUrl is present, give the user that link: they approve or deny there."
)

func defaultInstructions(mode surface.ToolsetMode, links bool) string {
	s := directInstructions
	if mode == surface.ToolsetMeta {
		s = metaInstructions
	}
	if links {
		s += linkInstructions
	}
	return s
}

// Options configure a Server. The zero value (or nil) is valid.
type Options struct {
	// Implementation names the server to clients. Default
	// {Name: "agentsurface"}; an empty Version is the agentsurface
	// module's version in the binary (its tag, or "(devel)" and the commit
	// of a build from a checkout).
	Implementation *mcp.Implementation
	// Mode is surface.ToolsetDirect (the default) or surface.ToolsetMeta.
	Mode surface.ToolsetMode
	// Scope limits discovery to these component-type prefixes: in direct
	// mode the tool list (a capability outside it is not a tool, so it
	// cannot be called), in meta mode what surface_discover lists (a
	// floor the agent's requested scope can only narrow).
	//
	// Scope is not an access boundary in meta mode: as the toolset
	// defines, surface_read and surface_act reach any capability the
	// consumer may use, by id, inside the scope or not. To restrict what
	// an agent may call, use policies (surface.Policy) or a consumer
	// whose grants exclude it.
	Scope []string
	// Elicit enables confirmations through MCP elicitation for clients
	// that support it: the client application shows the question and its
	// answer approves or denies the registry's confirmation record. The
	// client thus approves on the user's behalf; enable Elicit only for
	// clients you trust to ask the user (never for a client an agent or a
	// third party controls). The default, and clients without
	// elicitation, use two-phase confirmation: the user approves in the
	// host application (surface.Confirmations.Resolve) and the agent
	// calls again.
	Elicit bool
	// ApproveURL, if set, gives the address of the application's approve
	// page for a pending confirmation (p): a page where the person,
	// signed in to the application, sees the exact input and approves or
	// denies it ([surface.Confirmations.Resolve] or ResolveGrant, with
	// Channel [surface.ChannelURL] or [surface.ChannelLink]). With it,
	// every client reaches the person, in this order:
	//
	//   - a client that declares URL-mode elicitation (elicitation.url)
	//     is sent to the page (elicitation/create with mode "url" before
	//     2026-07-28, an input request at 2026-07-28), and the call waits
	//     for the person's decision there, until the confirmation
	//     expires at the latest, then goes on as with any approved (or
	//     denied, or expired) confirmation. The client only opens the
	//     page, it decides nothing, so this needs no trust in it and no
	//     Elicit; NoURLElicitation turns it off;
	//   - a client that declares form elicitation is asked with a form
	//     as before, with Elicit only;
	//   - any other client's CONFIRMATION_REQUIRED carries the link, in
	//     details.approveUrl ([surface.Error.ApproveURL]) and in the
	//     message the agent reads, to hand to the person.
	//
	// It is called outside every lock, with the tool call's context
	// ([RequestFromContext] gives the request), which ends after 5
	// seconds at most: it must return promptly, and a link it returns
	// after its context ended is not used. "" means no link, and so does
	// a link that is not an absolute http(s) URL; a panic is recovered
	// and logged, and gives no link. The link reaches the client and the
	// agent, so opening it must never approve by itself: the page needs
	// the person's session (or a signed, single-use, short-lived link
	// bound to p.ConfirmationID and the user) and still asks for their
	// click, never on GET. It may be called more than once for a
	// confirmation (once per answer that carries it).
	ApproveURL func(ctx context.Context, p surface.PendingConfirmation) string
	// NoURLElicitation keeps ApproveURL's link out of URL-mode
	// elicitation: every client then gets it in CONFIRMATION_REQUIRED
	// only (or, with Elicit, a form where the client supports one).
	NoURLElicitation bool
	// SigningKey signs the elicitation request state (HMAC-SHA256).
	// Default: a random key per Server, so state does not survive a
	// restart. Servers sharing a key still reject each other's state
	// (it names its registry and consumer).
	SigningKey []byte
	// Instructions are sent to clients at initialization. Empty means a
	// short default that explains the result envelope and confirmations.
	Instructions string
	// Logger receives diagnostics of this package and of the SDK. Nil
	// discards them. Never log to stdout when serving stdio.
	Logger *slog.Logger
	// TraceContext, if set, is applied first to every tools/call, with
	// the request's _meta (nil when it has none): the context it returns
	// is the one the call, the registry and the capability's handler run
	// under. A tracing library uses it to continue the client's trace
	// from the W3C trace context a client sends in _meta ("traceparent",
	// "tracestate"). It must not block. A panic is recovered and logged,
	// and the call goes on with the request's context.
	TraceContext func(ctx context.Context, meta map[string]any) context.Context
	// ToolNames, if set, gives tools the MCP names of the application's
	// choice instead of their wire names, by capability id, e.g. the
	// names an existing MCP server had, so that clients and prompts
	// written for it keep working. A name must be a valid MCP tool name
	// ([A-Za-z0-9_.-], at most 128 characters) and name one capability.
	// It applies while the capability has one tool in the catalog and no
	// other tool has that name; otherwise the tool keeps its wire name.
	// Direct mode only.
	ToolNames map[string]string
	// Content, if set, turns the output of a successful call into MCP
	// content blocks the result carries before the envelope's text: an
	// image or audio the output holds as base64, an embedded resource,
	// or a text for a human. It receives the tool called and the
	// capability's output (JSON; empty for none); nil adds nothing. The
	// envelope stays the result's structured content. It must not block;
	// a panic is recovered and logged, and adds nothing.
	Content func(tool surface.Tool, output surface.JSONText) []mcp.Content
	// Extend, if set, returns what the application adds to the server of
	// a (registry, consumer) besides the registry's tools: prompts,
	// resources, resource templates, completions. It is called once per
	// server, when the server is created (for an HTTPHandler, on the
	// first request of that pair), outside every lock; nil adds nothing.
	Extend func(reg *surface.Registry, consumer surface.Consumer) *Extension
}

// Extension is what an application adds to an MCP server of this
// package besides the registry's tools: its own prompts, resources and
// resource templates, and the handlers that go with them. Everything it
// adds belongs to that server's (registry, consumer): the handlers may
// answer per user.
type Extension struct {
	// Setup adds the prompts, resources and resource templates
	// (mcp.Server.AddPrompt, AddResource, AddResourceTemplate), before
	// the server answers any request. It may keep s to change them later
	// (the SDK announces the change to clients, through
	// subscriptions/listen for 2026-07-28 ones) or to send
	// notifications/resources/updated (s.ResourceUpdated). It must not
	// add or remove tools: the tool list is the registry's.
	Setup func(s *mcp.Server)
	// Complete answers completion/complete, for the arguments of the
	// prompts and resource templates Setup adds; setting it advertises
	// the completions capability.
	Complete func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)
	// Subscribe and Unsubscribe answer resources/subscribe and
	// resources/unsubscribe; setting Subscribe advertises resource
	// subscriptions.
	Subscribe   func(context.Context, *mcp.SubscribeRequest) error
	Unsubscribe func(context.Context, *mcp.UnsubscribeRequest) error
	// Logging advertises the logging capability, so that clients may set
	// the level (logging/setLevel) of the log messages a capability's
	// handler sends to the client through [RequestFromContext].
	Logging bool
}

// Server is one MCP server bound to one (registry, consumer): its tool list
// follows the toolset's catalog live. It is safe for concurrent use.
//
// In direct mode a call acts on what its MCP session was shown: it
// resolves against the catalog of the last tools/list answered to that
// session (a session that never listed uses the current catalog). A tool
// whose component was replaced or unmounted since is answered
// STALE_CAPABILITY or COMPONENT_UNMOUNTED, even when the tool has left
// the list, and a destructive or external-side-effect procedure called
// after a surface change STALE_CAPABILITY surface-version-mismatch: the
// client lists the tools again (every such change sends
// notifications/tools/list_changed). Requests without a session (over
// HTTP, 2026-07-28 clients, and every client of a stateless handler) are
// one client per credential: each resolves against the last tools/list
// answered to its own client.
type Server struct {
	reg      *surface.Registry
	consumer surface.Consumer
	// opts are the Options as given, with the defaults filled in: a
	// SigningKey, a Logger (quieted by Close).
	opts        Options
	consumerKey string // the consumer's Key, bound into request state
	ts          *surface.Toolset
	mcp         *mcp.Server
	idPrefix    string
	seq         atomic.Uint64
	unsub       func() // stops following the registry (direct mode)

	list  *toolList // the SDK's tool set, following the catalog
	pins  pins      // what each client was last shown
	calls calls     // the tool calls in progress
	waits pageWaits // the calls waiting for the approve page

	// quiet is shut by Close: what is logged and sent for this Server
	// passes it.
	quiet gate

	mu     sync.Mutex
	closed bool
}

// NewServer returns an MCP server for reg as seen by consumer. A consumer
// without a Kind gets surface.ConsumerMCPBridge. It fails when the toolset options
// are invalid (an unknown Mode).
func NewServer(reg *surface.Registry, consumer surface.Consumer, opts *Options) (*Server, error) {
	return newServer(reg, consumer, opts, "", nil)
}

// newServer is NewServer; a non-empty sessionPrefix makes every session id
// start with sessionPrefix + ".", which binds HTTP sessions to this Server.
// Tool definitions are shared with the other servers of shared (nil:
// none).
func newServer(reg *surface.Registry, consumer surface.Consumer, opts *Options, sessionPrefix string, shared *toolDefs) (*Server, error) {
	if reg == nil {
		return nil, errors.New("mcpsurface: nil registry")
	}
	s := &Server{reg: reg}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Mode == surface.ToolsetMeta && len(s.opts.ToolNames) > 0 {
		return nil, errors.New("mcpsurface: Options.ToolNames applies in direct mode only")
	}
	if consumer.Kind == "" {
		consumer.Kind = surface.ConsumerMCPBridge
	}
	consumer.Grants = slices.Clone(consumer.Grants)
	s.consumer, s.consumerKey = consumer, consumer.Key()
	s.idPrefix = "mcp_" + randid.Text() + "_"
	s.opts.Scope = slices.Clone(s.opts.Scope)
	s.opts.SigningKey = slices.Clone(s.opts.SigningKey)
	if len(s.opts.SigningKey) == 0 {
		s.opts.SigningKey = make([]byte, 32)
		_, _ = rand.Read(s.opts.SigningKey)
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.New(slog.DiscardHandler)
	} else {
		s.opts.Logger = quieted(s.opts.Logger, &s.quiet) // nothing is logged after Close
	}
	// The toolset remembers the confirmations it asks each client for,
	// so that a client that calls the same tool again presents its own.
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{
		Consumer: consumer, Mode: s.opts.Mode, Topology: surface.TopologyRemote, Scope: s.opts.Scope,
		RememberConfirmations: true, NewInvocationID: s.newInvocationID,
	})
	if err != nil {
		return nil, err
	}
	s.ts = ts
	var ext *Extension
	if s.opts.Extend != nil {
		ext = s.extension(s.opts.Extend)
	}
	s.mcp = mcp.NewServer(s.implementation(), s.serverOptions(sessionPrefix, ext))
	s.pins.srv = s.mcp
	if shared == nil {
		shared = &toolDefs{}
	}
	if s.list, err = newToolList(s.mcp, ts, s.callTool, shared, s.opts.Logger, s.opts.ToolNames); err != nil {
		_ = ts.Close()
		return nil, err
	}
	s.mcp.AddReceivingMiddleware(s.guard, s.pin) // outermost: around the SDK's elicitation round trip too
	s.mcp.AddSendingMiddleware(s.outgoing)
	if !s.meta() {
		// Follow the registry's surface-changed events and read the
		// catalog with Catalog(), which is always current, rather than
		// rely on Toolset.Subscribe: its notification is lost when any
		// Tools() call runs between a change and the toolset's own
		// refresh.
		s.unsub = reg.SubscribeTo(func(surface.Event) { s.list.sync() }, surface.SurfaceChanged{})
	}
	s.list.sync()
	if ext != nil && ext.Setup != nil {
		s.setup(ext.Setup)
	}
	return s, nil
}

// meta reports whether s serves the meta tools (Options.Mode).
func (s *Server) meta() bool { return s.opts.Mode == surface.ToolsetMeta }

// implementation is what s tells clients it is (Options.Implementation).
func (s *Server) implementation() *mcp.Implementation {
	impl := &mcp.Implementation{Name: "agentsurface"}
	if s.opts.Implementation != nil {
		c := *s.opts.Implementation
		impl = &c
	}
	if impl.Version == "" {
		impl.Version = version.Module()
	}
	return impl
}

// serverOptions are the go-sdk options of s, with the handlers of ext
// (nil: none).
func (s *Server) serverOptions(sessionPrefix string, ext *Extension) *mcp.ServerOptions {
	instructions := s.opts.Instructions
	if instructions == "" {
		instructions = defaultInstructions(s.opts.Mode, s.opts.ApproveURL != nil)
	}
	sopts := &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       infoAsDebug(newSDKLog(s.opts.Logger)),
		// Advertise tools.listChanged even while the catalog is empty:
		// 2026-07-28 clients only listen for changes a server announced.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		// What a server lists and reads is its consumer's: a shared cache
		// must never serve it to another (the SDK's default is public).
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
	}
	if sessionPrefix != "" {
		sopts.GetSessionID = func() string { return sessionPrefix + "." + randid.Text() }
	}
	if ext != nil {
		sopts.CompletionHandler = ext.Complete
		sopts.SubscribeHandler, sopts.UnsubscribeHandler = ext.Subscribe, ext.Unsubscribe
		if ext.Logging {
			sopts.Capabilities.Logging = &mcp.LoggingCapabilities{}
		}
	}
	return sopts
}

// extension calls Options.Extend; a panic is logged and adds nothing.
func (s *Server) extension(extend func(*surface.Registry, surface.Consumer) *Extension) (ext *Extension) {
	defer func() {
		if rec := recover(); rec != nil {
			s.opts.Logger.Error("mcpsurface: Options.Extend panicked", "panic", fmt.Sprint(rec))
			ext = nil
		}
	}()
	return extend(s.reg, s.consumer)
}

// setup calls Extension.Setup; a panic is logged.
func (s *Server) setup(fn func(*mcp.Server)) {
	defer func() {
		if rec := recover(); rec != nil {
			s.opts.Logger.Error("mcpsurface: Extension.Setup panicked", "panic", fmt.Sprint(rec))
		}
	}()
	fn(s.mcp)
}

// MCP returns the underlying go-sdk server, e.g. to add prompts or
// resources, or to connect transports directly. Tools this package did
// not add are left alone.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one session over t until ctx ends or the client disconnects,
// e.g. s.Run(ctx, &mcp.StdioTransport{}).
func (s *Server) Run(ctx context.Context, t mcp.Transport) error { return s.mcp.Run(ctx, t) }

// Close stops following the registry, ends the tool calls in progress
// (a call waiting for the client's answer to an elicitation returns
// CANCELLED) and closes the connected sessions. A change notification
// the SDK has scheduled is cancelled, and one it is sending has been sent
// (or failed) when Close returns; after that nothing is logged or sent
// for this Server. The tool list stays as it was. Close is idempotent;
// nothing the Server or the SDK started for it outlives it.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.calls.close()
	if s.unsub != nil {
		s.unsub()
	}
	_ = s.ts.Close()
	s.list.close()
	s.pins.close()
	for range 3 { // and those that connect meanwhile
		n := 0
		for ss := range s.mcp.Sessions() {
			_ = ss.Close()
			n++
		}
		if n == 0 {
			break
		}
	}
	s.cancelChangeNotifications()
	s.quiet.close() // a log record or message being written is written
	return nil
}

// newInvocationID mints an invocation id unique to this Server.
func (s *Server) newInvocationID() string {
	return s.idPrefix + strconv.FormatUint(s.seq.Add(1), 36)
}

func ptr[T any](v T) *T { return &v }
