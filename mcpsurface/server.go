package mcpsurface

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
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
)

func defaultInstructions(mode surface.ToolsetMode) string {
	if mode == surface.ToolsetMeta {
		return metaInstructions
	}
	return directInstructions
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
// HTTP, 2026-07-28 clients, and every client of a stateless handler)
// share one catalog: the last tools/list answered to any of them.
type Server struct {
	reg        *surface.Registry
	consumer   surface.Consumer
	ts         *surface.Toolset
	mcp        *mcp.Server
	meta       bool
	elicit     bool
	key        []byte
	log        *slog.Logger
	idPrefix   string
	seq        atomic.Uint64
	unsub      func()
	handler    mcp.ToolHandler
	consumerID string            // the consumer's Key, bound into request state
	names      map[string]string // Options.ToolNames
	byName     map[string]string // its inverse: MCP name → capability id
	content    func(surface.Tool, surface.JSONText) []mcp.Content
	scope      []string
	traceCtx   func(context.Context, map[string]any) context.Context

	// listing is held for reading while the SDK answers tools/list and
	// for writing while apply changes the SDK's tool set, so that a
	// session's recorded catalog is exactly the list it was sent.
	listing sync.RWMutex
	// quiet is shut by Close: what is logged and sent for this Server
	// passes it.
	quiet gate

	mu      sync.Mutex
	closed  bool
	dirty   bool             // the catalog may have changed since the last sync
	syncing bool             // some goroutine runs the sync loop
	current *surface.Catalog // the catalog the SDK's tool set shows
	served  map[string]bool  // catalog names of the tools in the SDK's tool set
	// toCatalog maps the MCP name of every renamed tool of the SDK's
	// tool set to its catalog name.
	toCatalog map[string]string
	listed    map[*mcp.ServerSession]*surface.Catalog // each session's last tools/list
	shared    *surface.Catalog                        // the last tools/list answered session-less
	calls     map[*inflight]struct{}                  // tool calls in progress
	closing   map[string]int                          // sessions being closed: refuse their calls
	// defs is every tool this Server put on the MCP server, by name.
	// Only the goroutine running the sync loop uses it, and Close once
	// the loop has stopped.
	defs  map[string]shown
	tools *toolDefs // the definitions, shared with the handler's other servers
}

// NewServer returns an MCP server for reg as seen by consumer. A consumer
// without a Kind gets surface.ConsumerMCPBridge. It fails when the toolset options
// are invalid (an unknown Mode).
func NewServer(reg *surface.Registry, consumer surface.Consumer, opts *Options) (*Server, error) {
	return newServer(reg, consumer, opts, "", nil)
}

// newServer is NewServer; a non-empty sessionPrefix makes every session id
// start with sessionPrefix + ".", which binds HTTP sessions to this Server.
// Tool definitions are shared with the other servers of tools (nil: none).
func newServer(reg *surface.Registry, consumer surface.Consumer, opts *Options, sessionPrefix string, tools *toolDefs) (*Server, error) {
	if reg == nil {
		return nil, errors.New("mcpsurface: nil registry")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if consumer.Kind == "" {
		consumer.Kind = surface.ConsumerMCPBridge
	}
	consumer.Grants = slices.Clone(consumer.Grants)
	s := &Server{
		reg: reg, consumer: consumer,
		meta: o.Mode == surface.ToolsetMeta, elicit: o.Elicit,
		key: slices.Clone(o.SigningKey), log: o.Logger,
		idPrefix: "mcp_" + randid.Text() + "_", consumerID: consumer.Key(),
		traceCtx: o.TraceContext, scope: slices.Clone(o.Scope), content: o.Content,
		served: map[string]bool{}, defs: map[string]shown{}, tools: tools,
	}
	// The toolset remembers the confirmations it asks each client for,
	// so that a client that calls the same tool again presents its own.
	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{
		Consumer: consumer, Mode: o.Mode, Topology: surface.TopologyRemote, Scope: o.Scope,
		RememberConfirmations: true, NewInvocationID: s.newInvocationID,
	})
	if err != nil {
		return nil, err
	}
	s.ts = ts
	if s.tools == nil {
		s.tools = &toolDefs{}
	}
	if len(o.ToolNames) > 0 {
		if s.meta {
			return nil, errors.New("mcpsurface: Options.ToolNames applies in direct mode only")
		}
		s.names, s.byName = map[string]string{}, map[string]string{}
		for capID, name := range o.ToolNames {
			if !validToolName(name) {
				return nil, fmt.Errorf("mcpsurface: Options.ToolNames: %q is not a valid MCP tool name", name)
			}
			if other, dup := s.byName[name]; dup {
				return nil, fmt.Errorf("mcpsurface: Options.ToolNames: %q names both %s and %s", name, other, capID)
			}
			s.names[capID], s.byName[name] = name, capID
		}
	}
	if len(s.key) == 0 {
		s.key = make([]byte, 32)
		_, _ = rand.Read(s.key)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	} else {
		s.log = quieted(s.log, &s.quiet) // nothing is logged after Close
	}
	impl := &mcp.Implementation{Name: "agentsurface"}
	if o.Implementation != nil {
		c := *o.Implementation
		impl = &c
	}
	if impl.Version == "" {
		impl.Version = version.Module()
	}
	instructions := o.Instructions
	if instructions == "" {
		instructions = defaultInstructions(o.Mode)
	}
	sopts := &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       infoAsDebug(newSDKLog(s.log)),
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
	var ext *Extension
	if o.Extend != nil {
		ext = s.extension(o.Extend)
	}
	if ext != nil {
		sopts.CompletionHandler = ext.Complete
		sopts.SubscribeHandler, sopts.UnsubscribeHandler = ext.Subscribe, ext.Unsubscribe
		if ext.Logging {
			sopts.Capabilities.Logging = &mcp.LoggingCapabilities{}
		}
	}
	s.mcp = mcp.NewServer(impl, sopts)
	s.mcp.AddReceivingMiddleware(s.guard, s.pin) // outermost: around the SDK's elicitation round trip too
	s.mcp.AddSendingMiddleware(s.outgoing)
	s.handler = s.callTool
	if !s.meta {
		// Follow the registry's surface-changed events and read the
		// catalog with Tools(), which is always current, rather than rely
		// on Toolset.Subscribe: its notification is lost when any Tools()
		// call runs between a change and the toolset's own refresh.
		s.unsub = reg.SubscribeTo(func(surface.Event) { s.sync() }, surface.SurfaceChanged{})
	}
	s.sync()
	if ext != nil && ext.Setup != nil {
		s.setup(ext.Setup)
	}
	return s, nil
}

// extension calls Options.Extend; a panic is logged and adds nothing.
func (s *Server) extension(extend func(*surface.Registry, surface.Consumer) *Extension) (ext *Extension) {
	defer func() {
		if rec := recover(); rec != nil {
			s.log.Error("mcpsurface: Options.Extend panicked", "panic", fmt.Sprint(rec))
			ext = nil
		}
	}()
	return extend(s.reg, s.consumer)
}

// setup calls Extension.Setup; a panic is logged.
func (s *Server) setup(fn func(*mcp.Server)) {
	defer func() {
		if rec := recover(); rec != nil {
			s.log.Error("mcpsurface: Extension.Setup panicked", "panic", fmt.Sprint(rec))
		}
	}()
	fn(s.mcp)
}

// validToolName reports whether name is a valid MCP tool name.
func validToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
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
	clear(s.listed)
	s.shared = nil
	calls := make([]*inflight, 0, len(s.calls))
	for f := range s.calls {
		calls = append(calls, f)
	}
	s.mu.Unlock()
	for _, f := range calls {
		f.cancel(errServerClosed)
	}
	if s.unsub != nil {
		s.unsub()
	}
	_ = s.ts.Close()
	s.listing.Lock()
	s.releaseDefs()
	s.listing.Unlock()
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

// sync brings the MCP tool list up to date with the toolset. Calls
// coalesce: while one goroutine runs the loop, others only mark the
// catalog dirty, so a registry change made from inside user code called by
// Tools() cannot deadlock, and no change is lost.
func (s *Server) sync() {
	s.mu.Lock()
	s.dirty = true
	if s.syncing {
		s.mu.Unlock()
		return
	}
	s.syncing = true
	for s.dirty && !s.closed {
		s.dirty = false
		s.mu.Unlock()
		s.apply()
		s.mu.Lock()
	}
	s.syncing = false
	s.mu.Unlock()
}

// releaseDefs gives the shared tool definitions back. It runs once, in
// Close, with s.listing held: an apply in progress has finished, and the
// next one sees the Server closed.
func (s *Server) releaseDefs() {
	for _, d := range s.defs {
		s.tools.release(d.key)
	}
	clear(s.defs)
}

// apply reads the catalog, adds the tools that are new or whose
// definition changed and removes the ones that are gone.
func (s *Server) apply() {
	defer func() {
		if rec := recover(); rec != nil { // never take the app's goroutine down
			s.log.Error("mcpsurface: updating the tool list panicked", "panic", fmt.Sprint(rec))
		}
	}()
	cat := s.ts.Catalog() // runs app code: outside every lock
	tools := s.rename(cat.Tools())
	s.listing.Lock()
	defer s.listing.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return // Close gave the definitions back: add none
	}
	served := make(map[string]bool, len(tools))
	toCatalog := make(map[string]string)
	for _, t := range tools {
		if t.Name != t.catalog {
			toCatalog[t.Name] = t.catalog
		}
		sig := signature(t.Tool)
		if s.defs[t.catalog].sig == sig {
			served[t.catalog] = true
			continue
		}
		def, key, ok := s.tools.acquire(t.Tool)
		if !ok {
			s.log.Error("mcpsurface: tool left out: MCP requires an object input schema", "tool", t.Name, "capabilityId", t.CapabilityID)
			continue
		}
		if old, ok := s.defs[t.catalog]; ok {
			s.tools.release(old.key)
			if old.name != t.Name {
				s.mcp.RemoveTools(old.name)
			}
		}
		s.defs[t.catalog] = shown{sig: sig, key: key, name: t.Name}
		served[t.catalog] = true
		s.mcp.AddTool(def, s.handler)
	}
	var gone []string
	for name, d := range s.defs {
		if !served[name] {
			gone = append(gone, d.name)
			delete(s.defs, name)
			s.tools.release(d.key)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		s.mcp.RemoveTools(gone...)
	}
	s.mu.Lock()
	s.current, s.served, s.toCatalog = cat, served, toCatalog
	s.mu.Unlock()
}

// namedTool is a catalog entry under its MCP name (Options.ToolNames),
// with its name in the catalog.
type namedTool struct {
	surface.Tool
	catalog string
}

// rename gives the tools the names Options.ToolNames asks for. A name
// applies to a capability with exactly one tool in the catalog, and only
// if no other tool has that name; otherwise the tool keeps its catalog
// name (and the conflict is logged).
func (s *Server) rename(tools []surface.Tool) []namedTool {
	out := make([]namedTool, len(tools))
	if len(s.names) == 0 {
		for i, t := range tools {
			out[i] = namedTool{t, t.Name}
		}
		return out
	}
	perCap := map[string]int{}
	taken := map[string]bool{}
	for _, t := range tools {
		perCap[t.CapabilityID]++
		taken[t.Name] = true
	}
	for i, t := range tools {
		out[i] = namedTool{t, t.Name}
		name, ok := s.names[t.CapabilityID]
		switch {
		case !ok || name == t.Name:
		case perCap[t.CapabilityID] > 1 || taken[name]:
			s.log.Warn("mcpsurface: tool keeps its name: Options.ToolNames would make it ambiguous", "tool", t.Name, "capabilityId", t.CapabilityID, "name", name)
		default:
			taken[name] = true
			out[i].Name = name
		}
	}
	return out
}

// catalogName returns the catalog name of the tool a request calls by
// its MCP name: the same unless Options.ToolNames renamed it. A renamed
// tool that has left the list is found by its capability in the catalog
// the request's session was shown.
func (s *Server) catalogName(req mcp.Request, name string) string {
	if len(s.names) == 0 {
		return name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.toCatalog[name]; ok {
		return c
	}
	capID, ok := s.byName[name]
	cat := s.shownTo(req)
	if !ok || cat == nil {
		return name
	}
	found := ""
	for _, t := range cat.Tools() {
		if t.CapabilityID == capID {
			if found != "" {
				return name // ambiguous: it was not renamed
			}
			found = t.Name
		}
	}
	return firstNonEmpty(found, name)
}

// shown is a tool this Server put on the MCP server: its signature, the
// key of its shared definition and its MCP name.
type shown struct {
	sig, key toolSig
	name     string // its MCP name
}

// toolSig is a digest of everything of a tool that its MCP definition
// shows, and of what a call of it targets.
type toolSig [sha256.Size]byte

// signature identifies everything of a tool that its MCP definition shows,
// and what a call of it targets: a new registration, and for a procedure
// the surface version gates (destructive, external side effect) a new
// version, re-add the tool, so that clients hear tools/list_changed and
// list again rather than call a stale entry.
func signature(t surface.Tool) toolSig {
	target := t.RegistrationID
	if t.Kind == surface.KindProcedure && (t.Effect == surface.EffectDestructive || t.Effect == surface.EffectExternalSideEffect) {
		target += "@" + t.SurfaceVersion
	}
	h := sha256.New()
	for _, s := range []string{t.Name, t.Description, string(t.InputSchema), t.CapabilityID, string(t.Kind), string(t.Effect),
		strconv.FormatBool(t.Idempotent), strconv.FormatBool(t.State.Available), t.State.UnavailableReason, t.State.Note, target} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return toolSig(h.Sum(nil))
}

// jsonText is JSON text held as a string: the registry's schema text,
// shared rather than copied into every server's tool definitions.
type jsonText string

// MarshalJSON implements json.Marshaler.
func (j jsonText) MarshalJSON() ([]byte, error) { return []byte(j), nil }

// toolDef is the MCP definition of a tool; ok is false when its input
// schema is not an object schema (the SDK would panic).
func toolDef(t surface.Tool) (def *mcp.Tool, ok bool) {
	if !t.ObjectInput() {
		return nil, false
	}
	h := t.Hints()
	ann := &mcp.ToolAnnotations{ReadOnlyHint: h.ReadOnly, DestructiveHint: ptr(h.Destructive), IdempotentHint: h.Idempotent, OpenWorldHint: ptr(h.OpenWorld)}
	meta := mcp.Meta{MetaAvailable: t.State.Available, MetaKind: string(t.Kind)}
	if t.CapabilityID != "" {
		meta[MetaCapabilityID] = t.CapabilityID
	}
	if t.Effect != "" {
		meta[MetaEffect] = string(t.Effect)
	}
	if t.State.UnavailableReason != "" {
		meta[MetaUnavailableReason] = t.State.UnavailableReason
	}
	if t.State.Note != "" {
		meta[MetaNote] = t.State.Note
	}
	return &mcp.Tool{
		Name: t.Name, Description: t.Description,
		InputSchema:  jsonText(t.InputSchema),
		OutputSchema: envelope{output: t.OutputSchema, anyOutput: t.CapabilityID == ""},
		Annotations:  ann, Meta: meta,
	}, true
}

// pin is receiving middleware: a tools/list answered to a session records
// the catalog it showed, which the session's later calls resolve against.
func (s *Server) pin(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" || s.meta {
			return next(ctx, method, req)
		}
		s.listing.RLock()
		res, err := next(ctx, method, req)
		s.mu.Lock()
		cat := s.current
		s.mu.Unlock()
		s.listing.RUnlock()
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && err == nil && cat != nil {
			if sessionless(req) {
				s.mu.Lock()
				s.shared = cat
				s.mu.Unlock()
			} else {
				s.record(ss, cat)
			}
		}
		return res, err
	}
}

// sessionless reports whether req came without a session: over HTTP with
// no session id (2026-07-28 clients, and every client of a stateless
// handler), each request on a temporary MCP session of its own.
func sessionless(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	e := req.GetExtra()
	return ok && ss.ID() == "" && e != nil && e.Header != nil
}

// record makes cat the catalog of session ss, and forgets the catalogs of
// sessions that have ended.
func (s *Server) record(ss *mcp.ServerSession, cat *surface.Catalog) {
	s.mu.Lock()
	_, known := s.listed[ss]
	s.mu.Unlock()
	if !known {
		s.forgetEnded()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		if s.listed == nil {
			s.listed = map[*mcp.ServerSession]*surface.Catalog{}
		}
		s.listed[ss] = cat
	}
}

// forgetEnded drops the catalogs of the sessions that have ended, and
// with them the last references this package held to those sessions.
func (s *Server) forgetEnded() {
	s.mu.Lock()
	if len(s.listed) == 0 {
		s.mu.Unlock()
		return
	}
	// Only sessions known before the SDK is asked which are live: one
	// recorded meanwhile is live, whatever the answer says.
	known := make([]*mcp.ServerSession, 0, len(s.listed))
	for k := range s.listed {
		known = append(known, k)
	}
	s.mu.Unlock()
	live := map[*mcp.ServerSession]bool{}
	for x := range s.mcp.Sessions() {
		live[x] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range known {
		if !live[k] {
			delete(s.listed, k)
		}
	}
	s.listed = orNil(s.listed) // an emptied map keeps its memory
}

// orNil returns m, or nil if it is empty, so that a map that grew and
// emptied again frees its memory.
func orNil[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

// catalogFor returns the catalog the calls of req's session resolve
// against: the one of its last tools/list, else the current one.
// Session-less requests share one: the last listed to any of them.
func (s *Server) catalogFor(req mcp.Request) *surface.Catalog {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cat := s.shownTo(req); cat != nil {
		return cat
	}
	return s.current
}

// shownTo returns the catalog of the last tools/list answered to req's
// session (or to the session-less requests), or nil. s.mu is held.
func (s *Server) shownTo(req mcp.Request) *surface.Catalog {
	if sessionless(req) {
		return s.shared
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		return s.listed[ss]
	}
	return nil
}

// shownOnly reports whether req's session was shown a tool called name
// that the SDK's tool set no longer has: only this package can answer
// its call.
func (s *Server) shownOnly(req mcp.Request, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served[name] {
		return false
	}
	cat := s.shownTo(req)
	if cat == nil {
		return false
	}
	_, ok := cat.Tool(name)
	return ok
}

// tool returns the entry called name of the current catalog.
func (s *Server) tool(name string) (surface.Tool, bool) {
	s.mu.Lock()
	cat := s.current
	s.mu.Unlock()
	if cat == nil {
		return surface.Tool{}, false
	}
	return cat.Tool(name)
}

// newInvocationID mints an invocation id unique to this Server.
func (s *Server) newInvocationID() string {
	return s.idPrefix + strconv.FormatUint(s.seq.Add(1), 36)
}

func ptr[T any](v T) *T { return &v }
