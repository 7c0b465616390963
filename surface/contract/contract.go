package contract

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/surface"
)

// Format and Version identify the contract format. A contract file whose
// format or version differs is refused by [Parse] and [Compare]: a
// reader never guesses what a field of another version means.
const (
	Format  = "agentsurface.contract"
	Version = 1
)

// Source says where a contract was taken from, and so which fields it can
// know (see the package documentation).
type Source string

// Sources.
const (
	// SourceRegistry: [FromRegistry], from the registry's own API.
	SourceRegistry Source = "registry"
	// SourceMCP: [FromTools], from what an MCP server lists.
	SourceMCP Source = "mcp"
)

// Visibility is what a consumer is shown of a capability.
type Visibility string

// Visibilities. Hidden < Disabled < Exposed in what they give a consumer;
// Listed is known over MCP only.
const (
	// Hidden: a policy hides it; for this consumer it does not exist.
	Hidden Visibility = "hidden"
	// Disabled: listed, but a policy disables it (DisabledReason says
	// why); calls fail CAPABILITY_NOT_AVAILABLE.
	Disabled Visibility = "disabled"
	// Exposed: listed, and no policy disables it. Whether the live state
	// makes it available at a given moment (When) is not part of the
	// contract.
	Exposed Visibility = "exposed"
	// Listed: the MCP server lists the tool. Over MCP a policy's disable
	// and the live state's unavailability are one field, which a
	// contract leaves out as live state, so exposed and disabled cannot be
	// told apart.
	Listed Visibility = "listed"
)

// rank orders visibilities by what they give a consumer. Listed, which is
// exposed or disabled, ranks between them, so that a change to or from it
// is never taken for no change.
func (v Visibility) rank() int {
	switch v {
	case Hidden:
		return 0
	case Disabled:
		return 1
	case Listed:
		return 2
	}
	return 3
}

// Contract is the contract of a surface: what each named consumer may
// observe and do. Its encoding ([Contract.Encode]) is deterministic: it
// depends only on the surface's declarations and policies, never on
// registration ids, versions, clocks or Go map order.
type Contract struct {
	// Format and Version identify the format ([Format], [Version]).
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Source is where the contract was taken from.
	Source Source `json:"source"`
	// Consumers are ordered by name.
	Consumers []ConsumerView `json:"consumers"`
}

// ConsumerView is the surface as one consumer sees it.
type ConsumerView struct {
	// Name names the consumer: its key ("mcp-bridge:agent") for a
	// registry contract, the name given to [FromTools] for an MCP one.
	Name string `json:"consumer"`
	// Kind, ID and Grants are the consumer's (registry contracts only).
	Kind   surface.ConsumerKind `json:"kind,omitempty"`
	ID     string               `json:"id,omitempty"`
	Grants []string             `json:"grants,omitempty"`
	// Components are the components the consumer's snapshot lists,
	// ordered by type and instance id (registry contracts only).
	Components []Component `json:"components,omitempty"`
	// Capabilities are ordered by [Capability.Key].
	Capabilities []Capability `json:"capabilities"`
}

// Component is a component as a consumer's snapshot lists it.
type Component struct {
	Type        string          `json:"type"`
	InstanceID  string          `json:"instanceId"`
	Description string          `json:"description"`
	Parent      *surface.Parent `json:"parent,omitempty"`
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// Capability is one capability as one consumer sees it. Which fields a
// contract can know depends on its Source: the package documentation
// lists them. An absent field is unknown (or, for a hidden capability,
// withheld), never a default.
type Capability struct {
	// CapabilityID is the capability id ("view:devices.table.selectRows",
	// "domain:devices.disable"); empty for an MCP tool that names none.
	CapabilityID string       `json:"capabilityId,omitempty"`
	Kind         surface.Kind `json:"kind,omitempty"`
	// Component is the component that registered the capability (for a
	// procedure reference, the one listing it). With CapabilityID it
	// identifies the capability in a registry contract.
	Component *surface.Parent `json:"component,omitempty"`
	// Context is the component a procedure reference is bound to.
	Context *surface.Parent `json:"context,omitempty"`
	// WireName is the tool name of the capability in the consumer's
	// catalog (the toolset's and the MCP server's).
	WireName string `json:"wireName,omitempty"`
	// Visibility and DisabledReason: what the consumer is shown.
	Visibility     Visibility `json:"visibility"`
	DisabledReason string     `json:"disabledReason,omitempty"`
	// Description is the stable description (for an MCP tool, without
	// the "[plane · effect]" prefix the toolset adds).
	Description string `json:"description,omitempty"`
	// Declared are the facts the capability declares about its calls
	// ([surface.Declaration]), by JSON name: its effect, idempotency,
	// reversibility (actions only) and declared confirmation level (for
	// a procedure reference after its effect's floor and
	// RequiresApproval, as the snapshot shows it). In the file form each
	// is a field of the capability (see [Facts]).
	Declared Facts `json:"-"`
	// ConfirmationByPolicy is "required" when a RequireConfirmation
	// policy of the capability's chain can raise the declared level to
	// required.
	// The contract cannot see a policy's condition: such a policy may
	// apply to every call or to some. Absent for observations, which
	// never ask for confirmation.
	ConfirmationByPolicy surface.Confirmation `json:"confirmationByPolicy,omitempty"`
	// RequiresConfirmation is whether the tool's description announces
	// that calls require confirmation (the confirmation fact is
	// required).
	RequiresConfirmation *bool `json:"requiresConfirmation,omitempty"`
	// InputSchema and OutputSchema are the JSON Schemas an agent is shown
	// (for a procedure reference, the input schema without its locked
	// bound fields), in canonical JSON. An observation has no input.
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// BoundFields are a procedure reference's input fields filled from
	// live UI state.
	BoundFields []BoundField `json:"boundFields,omitempty"`
	// Annotations are the MCP tool annotations. In a registry contract
	// they are mcpsurface's, from the facts above ([surface.Tool.Hints]), and
	// absent when mcpsurface does not serve the tool (its input schema is
	// not an object); in an MCP contract they are what the server sent.
	Annotations *Annotations `json:"annotations,omitempty"`
	// Meta is the agent-visible metadata record.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Policies is the capability's policy chain, outermost first.
	Policies []Policy `json:"policies,omitempty"`
	// StandingGrants is the ceiling of the standing grants a person may
	// make to let the consumer's calls skip the confirmation question
	// ([surface.CapabilityExplanation].Grants): absent when no grant may
	// (registry contracts only; an MCP server does not list it).
	StandingGrants *GrantCeiling `json:"standingGrants,omitempty"`
}

// GrantCeiling is the most a standing grant of a capability may allow:
// a TTL of at most MaxTTLMs milliseconds and at most MaxUses uses, 0 (left
// out) meaning no cap on uses.
type GrantCeiling struct {
	MaxTTLMs int64 `json:"maxTtlMs"`
	MaxUses  int   `json:"maxUses,omitempty"`
}

// usesRank ranks the uses cap by what it lets through: no cap is the most.
func (g *GrantCeiling) usesRank() int64 {
	if g.MaxUses == 0 {
		return 1 << 62
	}
	return int64(g.MaxUses)
}

// BoundField is an input field of a procedure reference filled from live
// UI state; a locked one cannot be set by the agent.
type BoundField struct {
	Path   string `json:"path"`
	Locked bool   `json:"locked"`
}

// Annotations are MCP tool annotations. DestructiveHint and
// OpenWorldHint are pointers because MCP gives their absence a meaning
// (true); the comparison reads an absent hint as MCP defines it.
type Annotations struct {
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
	Title           string `json:"title,omitempty"`
}

// destructive and openWorld read the hints with MCP's defaults.
func (a *Annotations) destructive() bool { return a.DestructiveHint == nil || *a.DestructiveHint }
func (a *Annotations) openWorld() bool   { return a.OpenWorldHint == nil || *a.OpenWorldHint }

// Policy is one policy of a capability's chain.
type Policy struct {
	Name  string              `json:"name"`
	Layer surface.PolicyLayer `json:"layer"`
	// Hooks are the hooks it sets, in pipeline order: discover,
	// authorize, invoke.
	Hooks []string `json:"hooks,omitempty"`
	// Vote is its Discover hook's decision for this consumer (expose,
	// disable or hide), with Reason a disable's reason.
	Vote   string `json:"vote,omitempty"`
	Reason string `json:"reason,omitempty"`
	// RequiresConfirmation marks a RequireConfirmation policy.
	RequiresConfirmation bool `json:"requiresConfirmation,omitempty"`
}

// Key identifies the capability within its consumer's view: the
// capability id and the component that registered it
// ("view:devices.table.selectRows @ devices.table/main"), or, when the
// contract does not know the component (over MCP), the capability id and
// the wire name ("domain:devices.disable @ tool domain_devices__disable").
func (c *Capability) Key() string {
	if c.Component != nil {
		return c.CapabilityID + " @ " + c.Component.Type + "/" + c.Component.InstanceID
	}
	if c.CapabilityID == "" {
		return "tool " + c.WireName
	}
	return c.CapabilityID + " @ tool " + c.WireName
}

// ErrFormat reports a contract that is not well formed, or of another
// format or version.
var ErrFormat = errors.New("contract: not a contract of this format")

// Encode returns the contract's file form: indented JSON with a final
// newline, consumers and capabilities in their canonical order, schemas
// and meta records in canonical JSON. Two equal contracts encode to the
// same bytes. It fails only on a contract that is not well formed (see
// [Parse]).
func (c *Contract) Encode() ([]byte, error) {
	n, err := c.normalized()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSuffix(buf.Bytes(), []byte("\n")), "", "  "); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// Parse reads a contract file. It refuses unknown fields, another format
// or version, a source it does not know, two consumers of one name, two
// capabilities of one key in a consumer's view, and schemas or meta
// records that are not JSON. The result is in canonical order.
func Parse(data []byte) (*Contract, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Contract
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the contract", ErrFormat)
	}
	return c.normalized()
}

// normalized returns a checked deep copy of c in canonical order, with
// canonical JSON texts.
func (c *Contract) normalized() (*Contract, error) {
	if c.Format != Format || c.Version != Version {
		return nil, fmt.Errorf("%w: format %q version %d, want %q version %d", ErrFormat, c.Format, c.Version, Format, Version)
	}
	if c.Source != SourceRegistry && c.Source != SourceMCP {
		return nil, fmt.Errorf("%w: unknown source %q", ErrFormat, c.Source)
	}
	out := &Contract{Format: Format, Version: Version, Source: c.Source, Consumers: make([]ConsumerView, len(c.Consumers))}
	for i, v := range c.Consumers {
		nv, err := v.normalized()
		if err != nil {
			return nil, err
		}
		out.Consumers[i] = nv
	}
	slices.SortFunc(out.Consumers, func(a, b ConsumerView) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out.Consumers); i++ {
		if out.Consumers[i].Name == out.Consumers[i-1].Name {
			return nil, fmt.Errorf("%w: consumer %q listed twice", ErrFormat, out.Consumers[i].Name)
		}
	}
	return out, nil
}

func (v ConsumerView) normalized() (ConsumerView, error) {
	if v.Name == "" {
		return v, fmt.Errorf("%w: a consumer without a name", ErrFormat)
	}
	out := v
	out.Grants = slices.Clone(v.Grants)
	out.Components = make([]Component, len(v.Components))
	for i, comp := range v.Components {
		meta, err := canonicalText(comp.Meta, "meta")
		if err != nil {
			return v, err
		}
		comp.Meta = meta
		comp.Parent = cloneParent(comp.Parent)
		out.Components[i] = comp
	}
	slices.SortFunc(out.Components, func(a, b Component) int {
		return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(a.InstanceID, b.InstanceID))
	})
	for i := 1; i < len(out.Components); i++ {
		if a, b := out.Components[i-1], out.Components[i]; a.Type == b.Type && a.InstanceID == b.InstanceID {
			return v, fmt.Errorf("%w: component %s/%s listed twice for %q", ErrFormat, a.Type, a.InstanceID, v.Name)
		}
	}
	if len(out.Components) == 0 {
		out.Components = nil
	}
	out.Capabilities = make([]Capability, len(v.Capabilities))
	for i, c := range v.Capabilities {
		nc, err := c.normalized()
		if err != nil {
			return v, fmt.Errorf("%s: %w", c.Key(), err)
		}
		out.Capabilities[i] = nc
	}
	slices.SortFunc(out.Capabilities, func(a, b Capability) int { return strings.Compare(a.Key(), b.Key()) })
	for i := 1; i < len(out.Capabilities); i++ {
		if k := out.Capabilities[i].Key(); k == out.Capabilities[i-1].Key() {
			return v, fmt.Errorf("%w: capability %q listed twice for %q", ErrFormat, k, v.Name)
		}
	}
	return out, nil
}

func (c Capability) normalized() (Capability, error) {
	switch c.Visibility {
	case Hidden, Disabled, Exposed, Listed:
	default:
		return c, fmt.Errorf("%w: unknown visibility %q", ErrFormat, c.Visibility)
	}
	if c.CapabilityID == "" && c.WireName == "" {
		return c, fmt.Errorf("%w: a capability with neither an id nor a wire name", ErrFormat)
	}
	var err error
	for _, t := range []struct {
		p    *json.RawMessage
		name string
	}{{&c.InputSchema, "inputSchema"}, {&c.OutputSchema, "outputSchema"}, {&c.Meta, "meta"}} {
		if *t.p, err = canonicalText(*t.p, t.name); err != nil {
			return c, err
		}
	}
	c.Component, c.Context = cloneParent(c.Component), cloneParent(c.Context)
	c.RequiresConfirmation = cloneBool(c.RequiresConfirmation)
	if c.Declared, err = c.Declared.normalized(); err != nil {
		return c, err
	}
	c.BoundFields = slices.Clone(c.BoundFields)
	slices.SortFunc(c.BoundFields, func(a, b BoundField) int { return strings.Compare(a.Path, b.Path) })
	for i := 1; i < len(c.BoundFields); i++ {
		if c.BoundFields[i].Path == c.BoundFields[i-1].Path {
			return c, fmt.Errorf("%w: bound field %q listed twice", ErrFormat, c.BoundFields[i].Path)
		}
	}
	if len(c.BoundFields) == 0 {
		c.BoundFields = nil
	}
	if c.Annotations != nil {
		a := *c.Annotations
		a.DestructiveHint, a.OpenWorldHint = cloneBool(a.DestructiveHint), cloneBool(a.OpenWorldHint)
		c.Annotations = &a
	}
	if c.StandingGrants != nil {
		g := *c.StandingGrants
		if g.MaxTTLMs <= 0 || g.MaxUses < 0 {
			return c, fmt.Errorf("%w: standingGrants needs a positive maxTtlMs and a maxUses not negative", ErrFormat)
		}
		c.StandingGrants = &g
	}
	c.Policies = slices.Clone(c.Policies)
	for i := range c.Policies {
		c.Policies[i].Hooks = slices.Clone(c.Policies[i].Hooks)
	}
	if len(c.Policies) == 0 {
		c.Policies = nil
	}
	return c, nil
}

// canonicalText returns the canonical form of a JSON text ("" stays "").
func canonicalText(t json.RawMessage, field string) (json.RawMessage, error) {
	if len(t) == 0 {
		return nil, nil
	}
	b, err := canonical.Canonicalize(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not JSON: %v", ErrFormat, field, err)
	}
	return b, nil
}

func cloneParent(p *surface.Parent) *surface.Parent {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	c := *b
	return &c
}

func ptr[T any](v T) *T { return &v }
