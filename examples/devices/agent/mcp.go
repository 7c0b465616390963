package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/agentsurface/agentsurface/internal/version"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP is [Tools] over an MCP client session (the go-sdk client).
type MCP struct {
	cs *mcp.ClientSession
}

// DialOptions configure [Dial]. The zero value is valid.
type DialOptions struct {
	// Token, if set, is sent as "Authorization: Bearer <Token>".
	Token string
	// HTTPClient makes the requests. Default http.DefaultClient's
	// transport.
	HTTPClient *http.Client
	// Name names the client to the server. Default "agentsurface-agent".
	Name string
	// OnToolsChanged, if set, is called when the server says its tool
	// list changed.
	OnToolsChanged func()
}

// Dial connects to the MCP endpoint url over Streamable HTTP. Close the
// result when done.
func Dial(ctx context.Context, url string, opts *DialOptions) (*MCP, error) {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	base := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		base = o.HTTPClient.Transport
	}
	hc := &http.Client{Transport: base}
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		hc = &c
		hc.Transport = base
	}
	if o.Token != "" {
		base = bearer{token: o.Token, next: base}
	}
	watch := &statusWatch{next: base}
	hc.Transport = watch
	copts := &mcp.ClientOptions{}
	if o.OnToolsChanged != nil {
		copts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { o.OnToolsChanged() }
	}
	name := firstNonEmpty(o.Name, "agentsurface-agent")
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: version.Module()}, copts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		if watch.unauthorized() {
			return nil, fmt.Errorf("agent: connect to %s: %w", url, ErrUnauthorized)
		}
		return nil, fmt.Errorf("agent: connect to %s: %w", url, err)
	}
	return &MCP{cs: cs}, nil
}

// ErrUnauthorized: the endpoint answered 401: the token is missing,
// wrong, or of a session that has ended.
var ErrUnauthorized = errors.New("the endpoint refused the token (401 Unauthorized)")

// statusWatch notes whether a response was 401.
type statusWatch struct {
	next http.RoundTripper
	mu   sync.Mutex
	saw  bool
}

func (w *statusWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := w.next.RoundTrip(r)
	if err == nil && res.StatusCode == http.StatusUnauthorized {
		w.mu.Lock()
		w.saw = true
		w.mu.Unlock()
	}
	return res, err
}

func (w *statusWatch) unauthorized() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.saw
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Session returns the underlying client session.
func (m *MCP) Session() *mcp.ClientSession { return m.cs }

// Close ends the session.
func (m *MCP) Close() error { return m.cs.Close() }

// List implements [Tools] with tools/list.
func (m *MCP) List(ctx context.Context) ([]Tool, error) {
	var out []Tool
	for t, err := range m.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, FromMCP(t))
	}
	return out, nil
}

// FromMCP describes an MCP tool of an agentsurface server.
func FromMCP(t *mcp.Tool) Tool {
	out := Tool{Name: t.Name, Description: t.Description, Available: true}
	if b, err := json.Marshal(t.InputSchema); err == nil {
		out.InputSchema = b
	}
	out.CapabilityID, _ = t.Meta[mcpsurface.MetaCapabilityID].(string)
	out.Effect, _ = t.Meta[mcpsurface.MetaEffect].(string)
	if v, ok := t.Meta[mcpsurface.MetaAvailable].(bool); ok {
		out.Available = v
	}
	out.UnavailableReason, _ = t.Meta[mcpsurface.MetaUnavailableReason].(string)
	return out
}

// RequiresConfirmation reports whether a tool's description says it
// requires the user's confirmation.
func RequiresConfirmation(t Tool) bool {
	head, _, _ := strings.Cut(t.Description, "]")
	return strings.Contains(head, "requires confirmation")
}

// Call implements [Tools] with tools/call. A capability failure is a
// result; an error means the call did not reach the registry (a protocol
// error such as an unknown tool, or a transport failure).
func (m *MCP) Call(ctx context.Context, name string, args json.RawMessage) (surface.Result, error) {
	return m.CallWith(ctx, name, args, CallOptions{})
}

// CallOptions are the optional parts of a tool call.
type CallOptions struct {
	// ConfirmationID presents an approved confirmation: the retry of a
	// call that answered CONFIRMATION_REQUIRED, in the call's _meta.
	ConfirmationID string
	// InvocationID, if set, is the call's idempotency key, in the call's
	// _meta: a retry with the same id (after a lost answer, or through
	// another MCP session) executes at most once where the server and the
	// domain deduplicate by it.
	InvocationID string
}

// CallWith is [MCP.Call] with options.
func (m *MCP) CallWith(ctx context.Context, name string, args json.RawMessage, o CallOptions) (surface.Result, error) {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if o.ConfirmationID != "" || o.InvocationID != "" {
		p.Meta = mcp.Meta{}
		if o.ConfirmationID != "" {
			p.Meta[mcpsurface.MetaConfirmationID] = o.ConfirmationID
		}
		if o.InvocationID != "" {
			p.Meta[mcpsurface.MetaInvocationID] = o.InvocationID
		}
	}
	res, err := m.cs.CallTool(ctx, p)
	if err != nil {
		return surface.Result{}, err
	}
	return Envelope(res)
}

// Envelope decodes the registry's result envelope from an agentsurface
// tool result (its structured content, else its text).
func Envelope(res *mcp.CallToolResult) (surface.Result, error) {
	var raw []byte
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return surface.Result{}, err
		}
		raw = b
	} else {
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				raw = []byte(t.Text)
				break
			}
		}
	}
	var out surface.Result
	if err := json.Unmarshal(raw, &out); err != nil || out.Status == "" {
		return surface.Result{}, errors.New("agent: the tool result is not an agentsurface envelope")
	}
	return out, nil
}
