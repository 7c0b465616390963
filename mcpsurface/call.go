package mcpsurface

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agentsurface/agentsurface/internal/canonical"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTool is the raw handler of every tool. Capability failures are
// results with IsError; it never returns a Go error. A panic in the code it
// runs (the registry, and through it the application's) is recovered as
// an EXECUTION_FAILED result.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (result *mcp.CallToolResult, err error) {
	p := req.Params
	name := s.catalogName(req, p.Name) // the catalog's name of the tool
	f := inflightFrom(ctx)
	at := &attempt{}
	if f != nil {
		at = &f.at
	}
	defer func() {
		if rec := recover(); rec != nil {
			result, err = toolResult(s.panicked(rec, name, p.Arguments, at)), nil
		}
	}()
	var in input // the client's answers to an earlier round
	if p.RequestState != "" || len(p.InputResponses) > 0 {
		var done bool
		if in, result, err, done = s.laterRound(ctx, f, at, req, name); done {
			return result, err
		}
	}
	if f != nil {
		f.round(req, in)
	}
	cat := s.catalogFor(req)
	res := s.call(ctx, at, cat, clientOf(req), name, p.Arguments, metaString(p.Meta, MetaInvocationID), metaString(p.Meta, MetaConfirmationID))
	if res.Status == surface.StatusOK && s.content == nil {
		return toolResult(res), nil
	}
	return s.respond(ctx, f, at, req, cat, name, res)
}

// laterRound reads what a call carries from an earlier round: the
// client's responses and the verified request state. A call answering a
// confirmation elicitation is handled here (done): the registry's record
// is resolved and the call retried with it. A request state this server
// did not issue for this call is refused (done, with the protocol error).
func (s *Server) laterRound(ctx context.Context, f *inflight, at *attempt, req *mcp.CallToolRequest, name string) (in input, result *mcp.CallToolResult, err error, done bool) {
	p := req.Params
	if p.RequestState == "" {
		return input{responses: p.InputResponses}, nil, nil, false
	}
	st, ok := s.verifyFor(p.RequestState, name, p.Arguments)
	if !ok {
		s.log.Warn("mcpsurface: refused a tool call with an invalid request state", "tool", name)
		return input{}, nil, errBadRequestState, true
	}
	if st.Use == stateConfirm {
		if f != nil {
			f.answered()
		}
		return input{}, toolResult(s.resume(ctx, at, req, name, st)), nil, true
	}
	return input{responses: p.InputResponses, state: st.App}, nil, nil, false
}

// respond is callTool's answer to a result that is not simply relayed:
// the input request or protocol error a handler asked for, a confirmation
// elicitation, or a result with Options.Content's blocks.
func (s *Server) respond(ctx context.Context, f *inflight, at *attempt, req *mcp.CallToolRequest, cat *surface.Catalog, name string, res surface.Result) (*mcp.CallToolResult, error) {
	args := req.Params.Arguments
	if answer, err, ok := s.answerOf(f, name, args, res); ok {
		return answer, err
	}
	if code(res) == surface.CodeConfirmationRequired && s.elicit && elicitable(req) && ctx.Value(noElicitKey{}) == nil {
		cid := res.Error.ConfirmationID()
		if expiresAt, pending := s.expiry(cid); pending {
			at.invocationID, at.capabilityID = res.InvocationID, res.CapabilityID
			if f != nil { // older clients are asked while this call waits: until expiry at most
				f.expireAt(s, cid, expiresAt)
			}
			return s.elicitation(cat, name, args, res), nil
		}
	}
	out := toolResult(res)
	if s.content != nil && res.Status == surface.StatusOK {
		if t, ok := cat.Tool(name); ok || s.meta {
			if !ok {
				t = surface.Tool{Name: name}
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
			s.log.Error("mcpsurface: Options.Content panicked", "tool", t.Name, "panic", fmt.Sprint(rec))
			blocks = nil
		}
	}()
	return slices.DeleteFunc(s.content(t, output), func(c mcp.Content) bool { return c == nil })
}

// expiry returns when the pending confirmation cid expires; pending is
// false once it has been resolved.
func (s *Server) expiry(cid string) (at time.Time, pending bool) {
	if cid == "" {
		return time.Time{}, false
	}
	for _, pc := range s.reg.Confirmations().Pending() {
		if pc.ConfirmationID == cid {
			return pc.ExpiresAt, true
		}
	}
	return time.Time{}, false
}

// call runs one tool call of client through cat, the catalog the
// session was shown (direct mode). sentID is the client's invocation id,
// if it sent one; cid a confirmation id sent in _meta. In direct mode the
// toolset presents the confirmation the client was asked for when it
// repeats the call (surface.ToolsetOptions.RememberConfirmations). at
// learns the invocation id used.
func (s *Server) call(ctx context.Context, at *attempt, cat *surface.Catalog, client, name string, args json.RawMessage, sentID, cid string) surface.Result {
	if s.meta {
		if cid != "" && name == surface.MetaAct {
			args = withFields(args, map[string]string{"confirmationId": cid})
		}
		at.invocationID = firstNonEmpty(sentID, s.newInvocationID())
		return s.ts.Call(ctx, name, args, surface.CallOptions{ToolCallID: at.invocationID, Client: client})
	}
	if cat == nil {
		cat = s.ts.Catalog()
	}
	res := cat.Call(ctx, name, args, surface.CallOptions{ToolCallID: sentID, ConfirmationID: cid, Client: client})
	at.invocationID, at.capabilityID = res.InvocationID, res.CapabilityID
	return res
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
