package surface

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ToolsetMode chooses how a toolset presents the surface to a model.
type ToolsetMode string

// Toolset modes.
const (
	// ToolsetDirect (the default) gives one tool per visible capability.
	ToolsetDirect ToolsetMode = "direct"
	// ToolsetMeta gives three generic tools — surface_discover, surface_read,
	// surface_act — whose definitions never change (experimental).
	ToolsetMeta ToolsetMode = "meta"
)

// Topology says where the model loop runs; it decides how confirmations
// reach the user by default.
type Topology string

// Topologies.
const (
	// TopologyEmbedded: the loop runs in the app, next to the user: a call that
	// needs confirmation waits for the user's decision (ConfirmationModeWait).
	TopologyEmbedded Topology = "embedded"
	// TopologyRemote: the loop is elsewhere (an MCP client): the model gets
	// CONFIRMATION_REQUIRED and retries (ConfirmationModeTwoPhase).
	TopologyRemote Topology = "remote"
)

// ConfirmationMode is how a toolset handles CONFIRMATION_REQUIRED.
type ConfirmationMode string

// Confirmation modes.
const (
	// ConfirmationModeWait waits for the user's decision and retries once with the
	// evidence, so the model sees one call and one final result. A denial
	// is returned, never retried.
	ConfirmationModeWait ConfirmationMode = "wait"
	// ConfirmationModeTwoPhase returns CONFIRMATION_REQUIRED to the model, which
	// retries with the confirmationId after the user approved.
	ConfirmationModeTwoPhase ConfirmationMode = "two-phase"
)

// ToolsetOptions configure a toolset. One of Topology or Confirmations is
// required: there is no ambiguous default.
type ToolsetOptions struct {
	// Consumer is who the model acts as; policies filter per consumer.
	Consumer Consumer
	// Mode is Direct (default) or Meta.
	Mode ToolsetMode
	// Topology picks the confirmation mode: TopologyEmbedded waits, TopologyRemote is
	// two-phase.
	Topology Topology
	// Confirmations, when set, overrides the topology's choice.
	Confirmations ConfirmationMode
	// Scope restricts discovery to these component-type prefixes. In meta
	// mode it is a floor: a model-supplied scope can only narrow it.
	Scope []string
	// Budget caps surface_discover results (meta mode only).
	Budget *Budget
	// RememberConfirmations lets a model approve by calling again
	// (two-phase, direct mode): the toolset remembers each
	// CONFIRMATION_REQUIRED it returned, per client
	// ([CallOptions.Client]), and a call that repeats the asked one (the
	// same tool, the same arguments up to key order and spacing, the
	// same client, no ConfirmationID nor ToolCallID) presents that
	// confirmation; once its retry settled, an identical call is a new
	// request. A call that sends the id of a confirmation its client was
	// asked for targets the registration it was asked for and, for the
	// same arguments and no ToolCallID, reuses the asking call's
	// invocation id, so that it executes at most once. A retry that found
	// the effective input changed (CONFIRMATION_INVALID mismatch) leaves
	// the approval standing; the next one gets an invocation id of its
	// own, so that it is judged on its effective input then. A record is
	// forgotten when it can no longer be used: Limits.ConfirmationTTL
	// after it was asked, Limits.DedupeCacheTTL after its retry settled.
	// mcpsurface sets it; by default a call presents only the
	// confirmation id it sends.
	RememberConfirmations bool
	// NewInvocationID mints the invocation id of a call that brings no
	// ToolCallID (an adapter's own format); nil means the registry's
	// ("inv_" and 12 characters).
	NewInvocationID func() string
}

// ErrToolsetOptions reports toolset options that are missing or
// contradictory (a programming error).
var ErrToolsetOptions = errors.New("surface: invalid toolset options")

// ToolState is the live state of a tool, kept apart from its definition so
// that definitions stay byte-identical while availability changes.
type ToolState struct {
	Available         bool   `json:"available"`
	UnavailableReason string `json:"unavailableReason,omitempty"`
	// Note is a procedure reference's live contextual note.
	Note string `json:"note,omitempty"`
}

// Tool is one tool of a toolset: a provider-neutral definition (name,
// description, input schema) plus its live state and what it targets.
type Tool struct {
	// Name is wire-safe ([A-Za-z0-9_-], at most 64 characters) and unique
	// in its catalog.
	Name string `json:"name"`
	// Description is stable: "[view · <effect>] " or "[domain · <effect>]
	// " (with " · requires confirmation") + the authored text. Live text is
	// in State.
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the tool's arguments (an object).
	InputSchema JSONText  `json:"inputSchema"`
	State       ToolState `json:"state"`

	// CapabilityID, InstanceID and RegistrationID are what a call targets
	// (empty for meta tools); SurfaceVersion is the catalog's.
	CapabilityID   string `json:"-"`
	InstanceID     string `json:"-"`
	RegistrationID string `json:"-"`
	SurfaceVersion string `json:"-"`
	// Kind is the capability's kind (a meta tool's is what it does:
	// surface_discover and surface_read observe, surface_act acts).
	Kind Kind `json:"-"`
	// Declaration is what the capability declares about its calls: an
	// action's is its snapshot descriptor's, copied whole; it holds the
	// facts [Tool.Hints] derives from. Observations are read, idempotent
	// and never ask for confirmation; only actions declare reversibility
	// (observations and procedure references have false); a procedure
	// reference is idempotent iff its effect is server-query, and its
	// Confirmation is after its effect's floor. The meta tools that read
	// are read and idempotent; surface_act declares nothing (no effect).
	Declaration `json:"-"`
	// OutputSchema is the capability's output schema (its descriptor's),
	// "" when it returns nothing and for meta tools.
	OutputSchema JSONText `json:"-"`
}

// ToolHints are the behaviour hints a client may show for a tool, as
// plain booleans: the facts MCP's tool annotations carry (readOnlyHint,
// destructiveHint, idempotentHint, openWorldHint). Adapters convert them
// to their protocol's form; they are computed in one place, [Tool.Hints],
// so that every adapter and a surface's contract (package
// surface/contract) say the same.
type ToolHints struct {
	// ReadOnly: the tool changes nothing (an observation, a server-query
	// procedure).
	ReadOnly bool
	// Destructive: the tool may destroy something (a destructive effect).
	Destructive bool
	// Idempotent: repeating a call has no further effect.
	Idempotent bool
	// OpenWorld: the tool reaches beyond the application (an external
	// side effect).
	OpenWorld bool
}

// Hints returns the tool's behaviour hints, from its kind, effect and
// idempotency. A meta tool that can act (surface_act, no effect of its
// own) reaches any capability: it is destructive and open-world.
func (t Tool) Hints() ToolHints {
	h := ToolHints{
		ReadOnly:   t.Kind == KindObservation || t.Effect == EffectRead || t.Effect == EffectServerQuery,
		Idempotent: t.Idempotent,
	}
	if t.Effect == "" {
		h.Destructive, h.OpenWorld = true, true
	} else {
		h.Destructive, h.OpenWorld = t.Effect == EffectDestructive, t.Effect == EffectExternalSideEffect
	}
	return h
}

// ObjectInput reports whether the tool's input schema is an object schema
// (its root "type" is exactly "object"), as MCP requires of every tool it
// lists; a capability whose raw input schema is another type has no MCP
// tool.
func (t Tool) ObjectInput() bool {
	var root struct {
		Type any `json:"type"`
	}
	return json.Unmarshal([]byte(t.InputSchema), &root) == nil && root.Type == "object"
}

// Toolset projects a registry into tools for a model loop, for one
// consumer. It is safe for concurrent use. Close it when the loop ends.
//
// A model acts on the tools it was shown: [Toolset.Catalog] returns one
// build of the tools as a [Catalog], whose Call targets exactly the
// entries listed (semantics §16.1). [Toolset.Tools] and [Toolset.Call] do
// the same for a host with one model loop: Call targets the catalog of the
// last Tools or Catalog call.
type Toolset struct {
	r       *Registry
	opts    ToolsetOptions
	confirm ConfirmationMode
	newID   func() string   // mints invocation ids
	asked   *retries        // the confirmations asked (RememberConfirmations), or nil
	ctx     context.Context // ends on Close: pending waits give up
	stop    context.CancelFunc
	unsub   func()

	mu     sync.Mutex
	defs   *catalogDefs // definitions of the last build
	shown  *Catalog     // the catalog of the last Tools or Catalog call
	sig    string       // JSON of the catalog subscribers last heard about
	subs   []*func(*Catalog)
	closed bool
}

// catalogDefs are the definitions of one build, shared read-only by the
// catalogs made from them while the surface version stays the same.
type catalogDefs struct {
	version string
	verNum  uint64
	static  bool   // the states change only with the version (Snapshot.static)
	tools   []Tool // with the states of the build; never modified
	byName  map[string]int
}

// Catalog is one build of a toolset's tools: what a model is shown, and
// how its calls of them are made. Each tool carries the registration id
// and surface version it was built from, and [Catalog.Call] sends them, so
// a call reaches the registration the model saw or fails with the
// registry's staleness verdict: STALE_CAPABILITY registration-replaced
// when its component was since replaced, COMPONENT_UNMOUNTED when it was
// unmounted, and STALE_CAPABILITY surface-version-mismatch for a
// destructive or external-side-effect procedure called after any surface
// change. The model lists the tools again, and never silently acts on
// something it was not shown.
//
// A Catalog never changes; it is safe for concurrent use. In meta mode it
// holds the three meta tools, whose calls resolve capability ids when they
// are made.
type Catalog struct {
	ts      *Toolset
	version string
	tools   []Tool // never modified
	byName  map[string]int
}

// CallOptions qualify one tool call.
type CallOptions struct {
	// ToolCallID is the model's tool-call id; it becomes the invocation id,
	// so that a transport retry of the same call is idempotent. Empty
	// means a fresh id.
	ToolCallID string
	// ConfirmationID presents the evidence of an approved
	// CONFIRMATION_REQUIRED when the model calls again (two-phase mode).
	// The retry keeps the registration id the catalog names but sends no
	// version hint: the user's approval, bound to the exact input,
	// postdates any change of the surface. In meta mode surface_act
	// carries its own confirmationId argument, which wins.
	ConfirmationID string
	// Client names the client that makes the call, when several act as
	// the toolset's consumer (two MCP sessions of one user): a
	// confirmation the registry asks a client for binds to it
	// ([InvokeOptions.Client]), so that another client of the consumer
	// can neither present it nor be handed it. Empty is the consumer's
	// only client.
	Client string
}

// emptyObject is the input schema of an observation's tool (semantics
// §16.1).
const emptyObject = `{"type":"object","properties":{},"additionalProperties":false}`

// NewToolset returns a toolset over reg. It fails with ErrToolsetOptions
// when neither Topology nor Confirmations is set, or when a Budget is set
// outside meta mode.
func NewToolset(reg *Registry, opts ToolsetOptions) (*Toolset, error) {
	if opts.Mode == "" {
		opts.Mode = ToolsetDirect
	}
	mode := opts.Confirmations
	switch {
	case opts.Mode != ToolsetDirect && opts.Mode != ToolsetMeta:
		return nil, errors.Join(ErrToolsetOptions, errors.New("mode must be direct or meta"))
	case mode != "" && mode != ConfirmationModeWait && mode != ConfirmationModeTwoPhase:
		return nil, errors.Join(ErrToolsetOptions, errors.New("confirmations must be wait or two-phase"))
	case mode == "" && opts.Topology == TopologyEmbedded:
		mode = ConfirmationModeWait
	case mode == "" && opts.Topology == TopologyRemote:
		mode = ConfirmationModeTwoPhase
	case mode == "":
		return nil, errors.Join(ErrToolsetOptions, errors.New("set Topology or Confirmations: there is no default confirmation mode"))
	}
	if opts.Budget != nil && opts.Mode != ToolsetMeta {
		return nil, errors.Join(ErrToolsetOptions, errors.New("a budget applies to meta mode only"))
	}
	opts.Consumer = opts.Consumer.normalized()
	opts.Scope = slices.Clone(opts.Scope)
	ts := &Toolset{r: reg, opts: opts, confirm: mode, newID: opts.NewInvocationID}
	if ts.newID == nil {
		ts.newID = newInvocationID
	}
	if opts.RememberConfirmations && mode == ConfirmationModeTwoPhase && opts.Mode == ToolsetDirect {
		ts.asked = &retries{}
	}
	ts.ctx, ts.stop = context.WithCancel(context.Background())
	if opts.Mode == ToolsetDirect {
		ts.unsub = reg.SubscribeTo(func(Event) { ts.refresh() }, SurfaceChanged{})
	}
	return ts, nil
}

// ConfirmationMode returns the toolset's effective confirmation mode.
func (ts *Toolset) ConfirmationMode() ConfirmationMode { return ts.confirm }

// Close unsubscribes from the registry and ends pending confirmation
// waits: a waiting Call returns the CONFIRMATION_REQUIRED it got. It is
// idempotent.
func (ts *Toolset) Close() error {
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		return nil
	}
	ts.closed = true
	ts.subs = nil
	ts.mu.Unlock()
	if ts.unsub != nil {
		ts.unsub()
	}
	ts.stop()
	return nil
}

// Catalog returns the current catalog, with live states, and makes it the
// one [Toolset.Call] targets. Descriptions and schemas are stable: they
// change only with the surface (semantics §16.1).
func (ts *Toolset) Catalog() *Catalog {
	c := ts.build()
	ts.mu.Lock()
	ts.shown = c
	ts.mu.Unlock()
	return c
}

// Tools returns the tools of a new [Toolset.Catalog], which Call then
// targets.
func (ts *Toolset) Tools() []Tool { return ts.Catalog().Tools() }

// WireNames maps the tool names of the catalog Call targets to capability
// ids: the catalog of the last Tools or Catalog call, else the current
// one. It is empty in meta mode.
func (ts *Toolset) WireNames() map[string]string { return ts.target().WireNames() }

// Call calls the tool called name, with the model's arguments, through
// the catalog of the last Tools or Catalog call (through the current
// catalog before any); see [Catalog.Call]. A host that serves several
// models from one toolset, or shows catalogs from Subscribe, calls through
// the Catalog it showed instead.
func (ts *Toolset) Call(ctx context.Context, name string, input json.RawMessage, opts CallOptions) Result {
	return ts.target().Call(ctx, name, input, opts)
}

// target is the catalog Toolset.Call uses.
func (ts *Toolset) target() *Catalog {
	ts.mu.Lock()
	c := ts.shown
	ts.mu.Unlock()
	if c == nil {
		c = ts.build()
	}
	return c
}

// Subscribe calls fn with the new catalog whenever a surface change alters
// a tool's name, description, schema or state. It returns a function that
// unsubscribes. Meta toolsets never change. A host that shows the new
// tools to its model calls them through the catalog fn received.
func (ts *Toolset) Subscribe(fn func(*Catalog)) (unsubscribe func()) {
	return subscribe(&ts.mu, &ts.subs, fn, func() bool { return ts.opts.Mode == ToolsetDirect && !ts.closed })
}

// refresh rebuilds the catalog after a surface change and notifies
// subscribers if it differs from what they last heard (not from the last
// build: a Tools call in between must not swallow the notification).
func (ts *Toolset) refresh() {
	c := ts.build()
	sig := catalogSignature(c.tools)
	ts.mu.Lock()
	if sig == ts.sig {
		ts.mu.Unlock()
		return
	}
	ts.sig = sig
	subs := ts.subs
	ts.mu.Unlock()
	notifyAll(ts.r.opts.Logger, "toolset", subs, func() *Catalog { return c })
}

// build makes a catalog from a fresh snapshot. Definitions (names,
// descriptions, schemas) are reused while the surface version and the set
// of listed capabilities stay the same; the states are always fresh.
func (ts *Toolset) build() *Catalog {
	if ts.opts.Mode == ToolsetMeta {
		return &Catalog{ts: ts, tools: metaTools()}
	}
	ts.mu.Lock()
	d := ts.defs
	ts.mu.Unlock()
	// Close drops every registration without a version bump: a closed
	// registry always takes the snapshot (it is empty).
	if d != nil && d.static && ts.r.version.Load() == d.verNum && !ts.r.closing() {
		return d.catalog(ts, d.tools) // nothing can have changed: no snapshot needed
	}
	snap := ts.r.Snapshot(SnapshotOptions{Consumer: ts.opts.Consumer, Scope: ts.opts.Scope})
	if d != nil && snap.SurfaceVersion == d.version {
		tools := slices.Clone(d.tools)
		if withStates(tools, snap) {
			return d.catalog(ts, tools)
		}
	}
	d = &catalogDefs{tools: catalog(snap), version: snap.SurfaceVersion, static: snap.static}
	d.verNum, _ = strconv.ParseUint(snap.SurfaceVersion, 10, 64)
	d.byName = make(map[string]int, len(d.tools))
	for i, t := range d.tools {
		d.byName[t.Name] = i
	}
	ts.mu.Lock()
	ts.defs = d
	ts.mu.Unlock()
	return d.catalog(ts, d.tools)
}

// catalog is a catalog of these definitions with the given tools (the
// definitions' own, or a copy with fresh states).
func (d *catalogDefs) catalog(ts *Toolset, tools []Tool) *Catalog {
	return &Catalog{ts: ts, version: d.version, tools: tools, byName: d.byName}
}

// Tools returns the catalog's tools, in catalog order: the caller's copy.
func (c *Catalog) Tools() []Tool { return slices.Clone(c.tools) }

// Tool returns the tool called name.
func (c *Catalog) Tool(name string) (Tool, bool) {
	i, ok := c.byName[name]
	if c.byName == nil { // meta mode
		i = slices.IndexFunc(c.tools, func(t Tool) bool { return t.Name == name })
		ok = i >= 0
	}
	if !ok {
		return Tool{}, false
	}
	return c.tools[i], true
}

// SurfaceVersion is the surface version the catalog was built at; empty
// in meta mode.
func (c *Catalog) SurfaceVersion() string { return c.version }

// WireNames maps the catalog's tool names to capability ids (semantics
// §16.2): the way back from a name, since only faithful names decode. It
// is empty in meta mode.
func (c *Catalog) WireNames() map[string]string {
	m := make(map[string]string, len(c.byName))
	for name, i := range c.byName {
		m[name] = c.tools[i].CapabilityID
	}
	return m
}

// withStates sets, in a copy of a catalog built from an earlier snapshot
// of the same version, the states of snap. It reports false when the
// snapshot lists other capabilities (a policy decision changed): the
// catalog must then be rebuilt.
func withStates(tools []Tool, snap Snapshot) bool {
	k := 0
	set := func(capID, regID string, st ToolState) bool {
		if k == len(tools) || tools[k].CapabilityID != capID || tools[k].RegistrationID != regID {
			return false
		}
		tools[k].State = st
		k++
		return true
	}
	for _, c := range snap.Components {
		for _, o := range c.Observations {
			if !set(o.CapabilityID, c.RegistrationID, ToolState{Available: o.Available, UnavailableReason: o.UnavailableReason}) {
				return false
			}
		}
		for _, a := range c.Actions {
			if !set(a.CapabilityID, c.RegistrationID, ToolState{Available: a.Available, UnavailableReason: a.UnavailableReason}) {
				return false
			}
		}
	}
	for _, p := range snap.Procedures {
		if !set(p.ProcedureID, p.RegistrationID, ToolState{Available: p.Available, UnavailableReason: p.UnavailableReason, Note: p.ContextualNote}) {
			return false
		}
	}
	return k == len(tools)
}

// catalogSignature is the JSON of what subscribers care about.
func catalogSignature(tools []Tool) string {
	b, _ := json.Marshal(tools) // Tool's JSON is exactly name, description, schema, state
	return string(b)
}

// toolDescription builds a stable tool description.
func toolDescription(plane string, effect Effect, required bool, text string) string {
	note := ""
	if required {
		note = " · requires confirmation"
	}
	return "[" + plane + " · " + string(effect) + note + "] " + text
}

// catalog turns a snapshot into direct-mode tools (semantics §16.1):
// each component's observations then actions, then procedures.
func catalog(snap Snapshot) []Tool {
	perType := map[string]int{}
	for _, c := range snap.Components {
		perType[c.Type]++
	}
	procCount := map[string]int{}
	for _, p := range snap.Procedures {
		procCount[p.ProcedureID]++
	}
	var tools []Tool
	for _, c := range snap.Components {
		suffix := ""
		if perType[c.Type] > 1 {
			suffix = c.InstanceID
		}
		for _, o := range c.Observations {
			tools = append(tools, Tool{
				Description: toolDescription("view", EffectRead, false, o.Description), InputSchema: emptyObject,
				State:        ToolState{Available: o.Available, UnavailableReason: o.UnavailableReason},
				CapabilityID: o.CapabilityID, InstanceID: suffix, RegistrationID: c.RegistrationID,
				Kind: KindObservation, Declaration: Declaration{Effect: EffectRead, Idempotent: true, Confirmation: ConfirmNever}, OutputSchema: o.OutputSchema,
			})
		}
		for _, a := range c.Actions {
			tools = append(tools, Tool{
				Description: toolDescription("view", a.Effect, a.Confirmation == ConfirmRequired, a.Description), InputSchema: a.InputSchema,
				State:        ToolState{Available: a.Available, UnavailableReason: a.UnavailableReason},
				CapabilityID: a.CapabilityID, InstanceID: suffix, RegistrationID: c.RegistrationID,
				Kind: KindAction, Declaration: a.Declaration, OutputSchema: a.OutputSchema,
			})
		}
	}
	seen := map[wireKey]int{} // references per key of a procedure referenced more than once
	for _, p := range snap.Procedures {
		suffix := ""
		if procCount[p.ProcedureID] > 1 {
			if p.Context != nil {
				suffix = p.Context.InstanceID
			}
			seen[wireKey{CapabilityID: p.ProcedureID, InstanceID: suffix}]++
		}
		tools = append(tools, Tool{
			Description: toolDescription("domain", p.Effect, p.Confirmation == ConfirmRequired, p.Description), InputSchema: p.InputSchema,
			State:        ToolState{Available: p.Available, UnavailableReason: p.UnavailableReason, Note: p.ContextualNote},
			CapabilityID: p.ProcedureID, InstanceID: suffix, RegistrationID: p.RegistrationID,
			Kind:         KindProcedure,
			Declaration:  Declaration{Effect: p.Effect, Idempotent: p.Effect == EffectServerQuery, Confirmation: p.Confirmation},
			OutputSchema: p.OutputSchema,
		})
	}
	// Two references to one procedure from components sharing an instance
	// id would share a key: name them by registration instead (DESIGN
	// decision 9).
	keys := make([]wireKey, len(tools))
	for i := range tools {
		t := &tools[i]
		if t.Kind == KindProcedure && seen[wireKey{CapabilityID: t.CapabilityID, InstanceID: t.InstanceID}] > 1 {
			t.InstanceID = safeSuffix(t.RegistrationID)
		}
		keys[i] = wireKey{CapabilityID: t.CapabilityID, InstanceID: t.InstanceID}
	}
	names := assignWireNames(keys)
	for i := range tools {
		tools[i].Name = names[keys[i]]
		tools[i].SurfaceVersion = snap.SurfaceVersion
	}
	return tools
}

// safeSuffix keeps the characters of s that wire names allow.
func safeSuffix(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && wireSafeByte(byte(r)) {
			return r
		}
		return -1
	}, s)
}

// Call calls the tool called name with the model's arguments, targeting
// the catalog's entry (see [Catalog]); a name the catalog does not have
// fails CAPABILITY_NOT_FOUND. Call never panics and returns the registry's
// result unchanged; in wait mode a CONFIRMATION_REQUIRED is answered by
// waiting for the user and retrying once with the evidence. With
// [ToolsetOptions.RememberConfirmations] a call may present a
// confirmation its client was asked for (see there).
func (c *Catalog) Call(ctx context.Context, name string, input json.RawMessage, opts CallOptions) Result {
	ts := c.ts
	if ts.opts.Mode == ToolsetMeta {
		return ts.callMeta(ctx, name, input, opts)
	}
	if ts.asked != nil {
		if res, ok := ts.retry(ctx, name, input, opts); ok {
			return res
		}
	}
	id := opts.ToolCallID
	if id == "" {
		id = ts.newID()
	}
	i, ok := c.byName[name]
	if !ok {
		return ts.r.unknownTool(id, name)
	}
	t := &c.tools[i]
	inv := Invocation{InvocationID: id, CapabilityID: t.CapabilityID, RegistrationID: t.RegistrationID, SurfaceVersion: t.SurfaceVersion}
	if t.Kind != KindObservation {
		inv.Input = input
	}
	if opts.ConfirmationID != "" {
		inv = presenting(inv, opts.ConfirmationID, id)
	}
	res := ts.invoke(ctx, inv, opts.Client)
	if ts.asked != nil && res.Error != nil && res.Error.Code == CodeConfirmationRequired {
		ts.remember(opts.Client, name, input, inv, t.Kind, res)
	}
	return res
}

// unknownTool is the result of calling a tool the catalog does not have:
// it does not exist for this consumer, or the registry is closed.
func (r *Registry) unknownTool(invocationID, name string) Result {
	e := NewError(CodeCapabilityNotFound, "", nil)
	if r.closing() {
		e = cancelledByClose()
	}
	return Result{Status: StatusError, InvocationID: invocationID, CapabilityID: name, Error: e, SurfaceVersion: r.Version()}
}

// invoke runs one invocation for client with the toolset's confirmation
// mode.
func (ts *Toolset) invoke(ctx context.Context, inv Invocation, client string) Result {
	res := ts.r.Invoke(ctx, inv, InvokeOptions{Consumer: ts.opts.Consumer, Client: client})
	if ts.confirm != ConfirmationModeWait || res.Error == nil || res.Error.Code != CodeConfirmationRequired {
		return res
	}
	return ts.waitAndRetry(ctx, inv, client, res)
}
