package surface

import (
	"encoding/json"
	"errors"
	"strconv"
)

// Effect classifies what a capability does to the world. Observations are
// always [EffectRead]; actions are view effects ([EffectLocalState], [EffectNavigation]);
// procedure references carry one of the server effects.
type Effect string

// The effect taxonomy. View effects belong to actions, server effects to
// procedure references; mixing planes is a [DefinitionPlaneViolation].
const (
	EffectRead               Effect = "read"
	EffectLocalState         Effect = "local-state"
	EffectNavigation         Effect = "navigation"
	EffectServerQuery        Effect = "server-query"
	EffectServerMutation     Effect = "server-mutation"
	EffectExternalSideEffect Effect = "external-side-effect"
	EffectDestructive        Effect = "destructive"
)

// isView reports whether e is a view-plane action effect.
func (e Effect) isView() bool { return e == EffectLocalState || e == EffectNavigation }

// isServer reports whether e is a domain-plane (procedure) effect.
func (e Effect) isServer() bool {
	switch e {
	case EffectServerQuery, EffectServerMutation, EffectExternalSideEffect, EffectDestructive:
		return true
	}
	return false
}

// Confirmation is the human-confirmation level of a capability. Levels rank
// never < optional < required; only [ConfirmRequired] makes an invocation
// ask for approval. The zero value means the default, [ConfirmNever].
type Confirmation string

// Confirmation levels.
const (
	ConfirmNever    Confirmation = "never"
	ConfirmOptional Confirmation = "optional"
	ConfirmRequired Confirmation = "required"
)

func (c Confirmation) valid() bool {
	return c == "" || c == ConfirmNever || c == ConfirmOptional || c == ConfirmRequired
}

// AuditLevel is how much of an invocation the audit trail records. The zero
// value means the default for the capability kind ([AuditLevelMetadata] for
// actions; observations are always [AuditLevelNone]).
type AuditLevel string

// Audit levels.
const (
	AuditLevelNone     AuditLevel = "none"
	AuditLevelMetadata AuditLevel = "metadata"
	AuditLevelFull     AuditLevel = "full"
)

func (a AuditLevel) valid() bool {
	return a == "" || a == AuditLevelNone || a == AuditLevelMetadata || a == AuditLevelFull
}

// Environment selects development conveniences (diagnostics) versus
// production behaviour. The zero value means [EnvProduction].
type Environment string

// Environments.
const (
	EnvDevelopment Environment = "development"
	EnvProduction  Environment = "production"
	EnvTest        Environment = "test"
)

// isDev reports whether e is [EnvDevelopment] or [EnvTest].
func (e Environment) isDev() bool { return e == EnvDevelopment || e == EnvTest }

// ConsumerKind says how a consumer reaches the surface. Kinds are a
// closed set, the constants below (the empty kind means
// [ConsumerEmbedded]): a consumer of any other kind is refused by
// [Registry.Invoke] (NOT_AUTHENTICATED) and sees an empty snapshot. A
// closed set keeps consumer keys unambiguous: no kind contains ":", so
// kind:id names exactly one consumer, and idempotency keys, confirmation
// evidence and per-consumer limits can never be shared between two
// consumers. Use [ConsumerOther] with a distinguishing ID for consumers
// that fit no other kind.
type ConsumerKind string

// Consumer kinds.
const (
	ConsumerEmbedded  ConsumerKind = "embedded"
	ConsumerWebMCP    ConsumerKind = "webmcp"
	ConsumerMCPBridge ConsumerKind = "mcp-bridge"
	ConsumerTest      ConsumerKind = "test"
	ConsumerOther     ConsumerKind = "other"
)

// Consumer identifies who is looking at or calling the surface: an embedded
// agent loop, an MCP session, a test. Policies decide per consumer. The zero
// value is the anonymous embedded consumer.
type Consumer struct {
	// ID identifies the consumer within its kind. Empty means "anonymous".
	ID string `json:"id"`
	// Kind is how the consumer connects. Empty means [ConsumerEmbedded].
	Kind ConsumerKind `json:"kind"`
	// Grants are free-form strings interpreted by host policies.
	Grants []string `json:"grants,omitempty"`
}

// normalized returns c with defaults applied.
func (c Consumer) normalized() Consumer {
	if c.ID == "" {
		c.ID = "anonymous"
	}
	if c.Kind == "" {
		c.Kind = ConsumerEmbedded
	}
	return c
}

// Valid reports whether k is one of the known kinds, or empty.
func (k ConsumerKind) Valid() bool {
	switch k {
	case "", ConsumerEmbedded, ConsumerWebMCP, ConsumerMCPBridge, ConsumerTest, ConsumerOther:
		return true
	}
	return false
}

// Key is the normalized consumer identity, kind + ":" + id
// ("embedded:anonymous" for the zero value). Idempotency keys,
// confirmation evidence and per-consumer limits are scoped by it. Two
// consumers share a key only if they are equal in kind and id: the known
// kinds contain no ":", and a kind outside them (which the registry
// refuses) is keyed as "?" + its Go-quoted text + ":" + id, a form no
// known kind starts with.
func (c Consumer) Key() string {
	c = c.normalized()
	if !c.Kind.Valid() {
		return "?" + strconv.Quote(string(c.Kind)) + ":" + c.ID
	}
	return string(c.Kind) + ":" + c.ID
}

// unknownConsumer is the refusal of a call whose consumer kind is not
// one of the known kinds.
func (r *Registry) unknownConsumer(c Consumer) *Error {
	r.logUnknownConsumer(c)
	return NewError(CodeNotAuthenticated, "The caller's identity is not recognised.", nil)
}

func (r *Registry) logUnknownConsumer(c Consumer) {
	r.opts.Logger.Error("surface: refused a consumer of unknown kind; use one of the ConsumerKind constants", "kind", string(c.Kind), "consumerId", c.ID)
}

// Route describes where the host application currently is; it appears in
// snapshots when [Options.Route] returns one.
type Route struct {
	Path   string            `json:"path"`
	Params map[string]string `json:"params,omitempty"`
}

// Parent is an optional containment link from a component to another one,
// for consumers that rebuild a hierarchy from the flat snapshot.
type Parent struct {
	Type       string `json:"type"`
	InstanceID string `json:"instanceId"`
}

// None is the input or output type of a capability that takes or returns
// nothing. An action with input None accepts only an empty object; one with
// output None settles without output.
type None struct{}

// JSONText is an immutable piece of JSON text (a schema, a meta record).
// Descriptors share it with the registry safely because Go strings cannot be
// mutated. It marshals as the JSON it holds.
type JSONText string

// MarshalJSON returns the JSON text; an empty JSONText is null.
func (t JSONText) MarshalJSON() ([]byte, error) {
	if t == "" {
		return []byte("null"), nil
	}
	return []byte(t), nil
}

// UnmarshalJSON stores a copy of the JSON text.
func (t *JSONText) UnmarshalJSON(b []byte) error {
	if !json.Valid(b) {
		return errors.New("surface: invalid JSON text")
	}
	*t = JSONText(b) // the conversion copies
	return nil
}

// Raw returns a fresh copy of the JSON text as a json.RawMessage.
func (t JSONText) Raw() json.RawMessage { return json.RawMessage(t) }
