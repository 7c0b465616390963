package mcpsurface

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolCall is one round of a tools/call as this package handles it: the
// request, the tool it calls (by its catalog name), the client it comes
// from, and what the call has learned of its invocation. The SDK calls a
// tool's handler once per round: again, in the same call, for each round
// an older client answers.
type toolCall struct {
	s      *Server
	req    *mcp.CallToolRequest
	name   string // the tool's name in the catalog
	client string // clientOf(req)
	f      *inflight
	at     *attempt         // what the call learned of its invocation: f.at, or its own
	cat    *surface.Catalog // the catalog it resolves against, once read (catalog)
}

// callTool is the raw handler of every tool. Capability failures are
// results with IsError; it never returns a Go error but the protocol
// errors this package defines. A panic in the code it runs (the registry,
// and through it the application's) is recovered as an EXECUTION_FAILED
// result.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (result *mcp.CallToolResult, err error) {
	c := &toolCall{s: s, req: req, name: s.catalogName(req, req.Params.Name), client: clientOf(req), f: inflightFrom(ctx)}
	if c.f != nil {
		c.at = &c.f.at
	} else { // outside guard (never, as the SDK calls it)
		c.at = &attempt{}
	}
	defer func() {
		if rec := recover(); rec != nil {
			result, err = toolResult(s.panicked(rec, c.name, req.Params.Arguments, c.at)), nil
		}
	}()
	return c.run(ctx)
}

// run answers the call: it reads what an earlier round sent, calls the
// registry and turns its result into the MCP answer.
func (c *toolCall) run(ctx context.Context) (*mcp.CallToolResult, error) {
	p := c.req.Params
	var in input // the client's answers to an earlier round
	if p.RequestState != "" || len(p.InputResponses) > 0 {
		var (
			result *mcp.CallToolResult
			err    error
			done   bool
		)
		if in, result, err, done = c.laterRound(ctx); done {
			return result, err
		}
	}
	if c.f != nil {
		c.f.round(c.req, in)
	}
	res := c.invoke(ctx, metaString(p.Meta, MetaInvocationID), metaString(p.Meta, MetaConfirmationID))
	if res.Status == surface.StatusOK && c.s.opts.Content == nil {
		return toolResult(res), nil
	}
	return c.respond(ctx, res)
}

// laterRound reads what a call carries from an earlier round: the
// client's responses and the verified request state. A call answering a
// confirmation elicitation is handled here (done): the registry's record
// is resolved and the call retried with it. A request state this server
// did not issue for this call is refused (done, with the protocol error).
func (c *toolCall) laterRound(ctx context.Context) (in input, result *mcp.CallToolResult, err error, done bool) {
	p := c.req.Params
	if p.RequestState == "" {
		return input{responses: p.InputResponses}, nil, nil, false
	}
	st, ok := c.s.verifyFor(p.RequestState, c.name, p.Arguments)
	if !ok {
		c.s.opts.Logger.Warn("mcpsurface: refused a tool call with an invalid request state", "tool", c.name)
		return input{}, nil, errBadRequestState, true
	}
	if st.Use == stateConfirm {
		if c.f != nil {
			c.f.answered()
		}
		return input{}, toolResult(c.resume(ctx, st)), nil, true
	}
	return input{responses: p.InputResponses, state: st.App}, nil, nil, false
}

// catalog returns the catalog the call resolves against: the one its
// client was last shown, else the current one; the same for the whole
// round.
func (c *toolCall) catalog() *surface.Catalog {
	if c.cat == nil {
		c.cat = c.s.catalogFor(c.req)
	}
	return c.cat
}

// invoke calls the registry for this round: through the catalog its
// client was shown (direct mode), or the toolset's meta tools. sentID is
// the client's invocation id, if it sent one; cid a confirmation id sent
// in _meta. In direct mode the toolset presents the confirmation the
// client was asked for when it repeats the call
// (surface.ToolsetOptions.RememberConfirmations). c.at learns the
// invocation id used.
func (c *toolCall) invoke(ctx context.Context, sentID, cid string) surface.Result {
	args := c.req.Params.Arguments
	if c.s.meta() {
		if cid != "" && c.name == surface.MetaAct {
			args = withFields(args, map[string]string{"confirmationId": cid})
		}
		c.at.invocationID = firstNonEmpty(sentID, c.s.newInvocationID())
		return c.s.ts.Call(ctx, c.name, args, surface.CallOptions{ToolCallID: c.at.invocationID, Client: c.client})
	}
	res := c.catalog().Call(ctx, c.name, args, surface.CallOptions{ToolCallID: sentID, ConfirmationID: cid, Client: c.client})
	c.at.invocationID, c.at.capabilityID = res.InvocationID, res.CapabilityID
	return res
}

// respond is the answer to a result that is not simply relayed: the
// input request or protocol error a handler asked for, a confirmation
// elicitation or approve link (approve.go), or a result with
// Options.Content's blocks.
func (c *toolCall) respond(ctx context.Context, res surface.Result) (*mcp.CallToolResult, error) {
	s := c.s
	if answer, err, ok := c.answerOf(res); ok {
		return answer, err
	}
	if code(res) == surface.CodeConfirmationRequired {
		if elicit, ok := c.confirm(ctx, &res); ok {
			return elicit, nil
		}
	}
	out := toolResult(res)
	if s.opts.Content != nil && res.Status == surface.StatusOK {
		if t, ok := c.catalog().Tool(c.name); ok || s.meta() {
			if !ok {
				t = surface.Tool{Name: c.name}
			}
			out.Content = append(s.contentOf(t, res.Output), out.Content...)
		}
	}
	return out, nil
}

// contentOf calls Options.Content; a panic is logged and adds nothing.
func (s *Server) contentOf(t surface.Tool, output surface.JSONText) (blocks []mcp.Content) {
	defer func() {
		if rec := recover(); rec != nil {
			s.opts.Logger.Error("mcpsurface: Options.Content panicked", "tool", t.Name, "panic", fmt.Sprint(rec))
			blocks = nil
		}
	}()
	return slices.DeleteFunc(s.opts.Content(t, output), func(c mcp.Content) bool { return c == nil })
}

// clientOf names the client a request comes from, among those of its
// consumer, so that a confirmation one client was asked for binds to it
// (spec 06 rule 2), whatever resolves several clients to one consumer: its
// MCP session; for a request without one (session-less over HTTP: every
// 2026-07-28 client, and every client of a stateless handler), the
// credential it presents (its Authorization header). Requests that
// present neither a session id nor a credential (stdio and in-memory
// transports) are one client.
func clientOf(req mcp.Request) string {
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil && ss.ID() != "" {
		return ss.ID() // session ids hold no ':', so none is taken for a credential's name
	}
	if e := req.GetExtra(); e != nil && e.Header != nil {
		if cred := e.Header.Get("Authorization"); cred != "" {
			sum := sha256.Sum256([]byte(cred))
			return "credential:" + base64.RawURLEncoding.EncodeToString(sum[:16])
		}
	}
	return ""
}

// toolResult relays a registry result losslessly: the envelope as JSON
// text and as structured content, isError for error results.
func toolResult(res surface.Result) *mcp.CallToolResult {
	b, err := json.Marshal(res)
	if err != nil { // only invalid output JSON could do this; the registry validates it
		res = surface.Result{Status: surface.StatusError, InvocationID: res.InvocationID, CapabilityID: res.CapabilityID,
			Error: surface.NewReasonError(surface.CodeExecutionFailed, surface.ReasonOutputInvalid, ""), SurfaceVersion: res.SurfaceVersion}
		b, _ = json.Marshal(res)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
		IsError:           res.Status != surface.StatusOK,
	}
}

func code(res surface.Result) surface.Code {
	if res.Error == nil {
		return ""
	}
	return res.Error.Code
}

// metaString returns the string value of key in a request's _meta.
func metaString(m mcp.Meta, key string) string {
	s, _ := m[key].(string)
	return s
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// withFields returns the JSON object args with the given string fields
// set where absent. Arguments that are not an object are returned as they
// are (the toolset rejects them).
func withFields(args json.RawMessage, fields map[string]string) json.RawMessage {
	obj := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(args); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if json.Unmarshal(t, &obj) != nil || obj == nil {
			return args
		}
	}
	for k, v := range fields {
		if _, ok := obj[k]; !ok {
			b, _ := json.Marshal(v)
			obj[k] = b
		}
	}
	b, _ := json.Marshal(obj)
	return b
}

// canonicalArgs is the canonical JSON of a call's arguments; absent and
// null are the empty object, as the registry treats them for object
// schemas. Arguments that are not JSON are kept as they are.
func canonicalArgs(args json.RawMessage) string {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "{}"
	}
	c, err := canonical.Canonicalize(t)
	if err != nil {
		return "\x00" + string(t)
	}
	return string(c)
}
