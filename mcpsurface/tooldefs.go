package mcpsurface

import (
	"bytes"
	"crypto/sha256"
	"strconv"
	"sync"

	"github.com/agentsurface/agentsurface/internal/schema"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolDefs shares tool definitions among the Servers of one HTTPHandler.
// Users of one application are shown the same tools: a definition (name,
// description, schemas, annotations, _meta) depends on the capability and
// its live state, not on the user or the registration, so the servers of
// a thousand users hold one copy of each instead of a thousand. A shared
// *mcp.Tool is never modified (the SDK does not modify the tools it is
// given either); a definition is dropped when no server shows it. It is
// safe for concurrent use.
type toolDefs struct {
	mu   sync.Mutex
	defs map[toolSig]*sharedTool
}

type sharedTool struct {
	tool *mcp.Tool
	refs int
}

// acquire returns the definition of t, made by toolDef if no server
// shows it yet; key names it for release. ok is false when the tool
// cannot be served (toolDef).
func (d *toolDefs) acquire(t surface.Tool) (def *mcp.Tool, key toolSig, ok bool) {
	key = defSignature(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.defs[key]; s != nil {
		s.refs++
		return s.tool, key, true
	}
	def, ok = toolDef(t)
	if !ok {
		return nil, key, false
	}
	if d.defs == nil {
		d.defs = map[toolSig]*sharedTool{}
	}
	d.defs[key] = &sharedTool{tool: def, refs: 1}
	return def, key, true
}

// release ends one server's use of the definition key.
func (d *toolDefs) release(key toolSig) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.defs[key]; s != nil {
		if s.refs--; s.refs <= 0 {
			delete(d.defs, key)
		}
	}
}

// defSignature identifies everything toolDef puts in a definition.
func defSignature(t surface.Tool) toolSig {
	h := sha256.New()
	for _, s := range []string{t.Name, t.Description, string(t.InputSchema), t.CapabilityID, t.InstanceID, string(t.Kind), string(t.Effect),
		strconv.FormatBool(t.Idempotent), strconv.FormatBool(t.State.Available), t.State.UnavailableReason, t.State.Note, string(t.OutputSchema)} {
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
	title := t.Title()
	ann := &mcp.ToolAnnotations{Title: title, ReadOnlyHint: h.ReadOnly, DestructiveHint: ptr(h.Destructive), IdempotentHint: h.Idempotent, OpenWorldHint: ptr(h.OpenWorld)}
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
		Name: t.Name, Title: title, Description: t.Description,
		InputSchema:  portable(t.InputSchema),
		OutputSchema: jsonText(envelopeSchema(surface.JSONText(portable(t.OutputSchema)), t.CapabilityID == "")),
		Annotations:  ann, Meta: meta,
	}, true
}

// portable is a schema as clients map it most widely (schema.Portable):
// without type arrays, and without schemas that constrain nothing. A
// schema with neither stays the registry's text, shared.
func portable(s surface.JSONText) jsonText {
	if s == "" {
		return ""
	}
	b := []byte(s)
	if p := schema.Portable(b); !bytes.Equal(p, b) {
		return jsonText(p)
	}
	return jsonText(s)
}
