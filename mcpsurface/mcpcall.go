package mcpsurface

import (
	"context"
	"encoding/json"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A capability's handler runs the same for every adapter. The functions
// of this file let a handler that knows it serves MCP clients use what
// only MCP has: the client's session (progress, log messages, requests
// of its own), multi-round-trip input requests, and the protocol error of
// a client that lacks a capability. Such a handler is MCP-specific: under
// another adapter RequestFromContext returns nil, Input nothing, and the
// errors of InputRequired and MissingClientCapability are the
// PRECONDITION_FAILED they carry.

// RequestFromContext returns the MCP tools/call request a capability's
// handler runs for, or nil when the call did not come through this
// package. Through it a handler reaches the client's session: progress
// (Session.NotifyProgress with Params.GetProgressToken()), log messages
// (Session.Log, for clients that set a level), the HTTP request's
// headers (Extra.Header) and, on a stateful session, requests of its own
// (Session.CreateMessage, Session.Elicit). The request is the SDK's:
// read it, never modify it.
func RequestFromContext(ctx context.Context) *mcp.CallToolRequest {
	if f := inflightFrom(ctx); f != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.req
	}
	return nil
}

// Input returns the client's responses to the input requests of the
// call's previous round ([InputRequired]), and the state that round asked
// to keep, verified: state comes back only as this package signed it.
// Both are empty in a call's first round. The responses are the client's
// and only as trustworthy as it is.
func Input(ctx context.Context) (responses mcp.InputResponseMap, state string) {
	if f := inflightFrom(ctx); f != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.in.responses, f.in.state
	}
	return nil, ""
}

// InputRequired ends a call with a request for input from the client
// (the multi-round-trip requests of MCP 2026-07-28: elicitation,
// sampling, roots): the handler returns the error it returns. The client
// answers and calls the tool again with the same arguments; [Input] then
// gives the handler the responses and state. The state is signed and
// bound to the registry, the consumer, the tool and the arguments: a
// retry whose state does not verify is refused with a JSON-RPC error
// (-32602) before the handler runs. Clients older than 2026-07-28 are
// asked by the SDK, on their session, while the call waits.
//
// The request kinds must be ones the client declared
// (RequestFromContext(ctx).ClientCapabilities()).
func InputRequired(ctx context.Context, requests mcp.InputRequestMap, state string) error {
	if f := inflightFrom(ctx); f != nil && len(requests) > 0 {
		f.mu.Lock()
		f.out = &outcome{requests: requests, state: state}
		f.mu.Unlock()
	}
	return &mcpOutcome{surface.NewReasonError(surface.CodePreconditionFailed, reasonInputRequired, "The call needs input from the client.")}
}

// MissingClientCapability ends a call that needs a client capability the
// client did not declare (sampling, say) with the protocol error MCP
// defines for it (-32021, data.requiredCapabilities): the handler returns
// the error it returns.
func MissingClientCapability(ctx context.Context, required *mcp.ClientCapabilities) error {
	if f := inflightFrom(ctx); f != nil && required != nil {
		f.mu.Lock()
		f.out = &outcome{missing: required}
		f.mu.Unlock()
	}
	return &mcpOutcome{surface.NewReasonError(surface.CodePreconditionFailed, reasonMissingCapability, "The client lacks a capability this call needs.")}
}

// Reasons of the PRECONDITION_FAILED of InputRequired and
// MissingClientCapability.
const (
	reasonInputRequired     surface.Reason = "input-required"
	reasonMissingCapability surface.Reason = "client-capability-missing"
)

// mcpOutcome is the error of InputRequired and MissingClientCapability:
// the registry settles the call with the *surface.Error it wraps (no
// failure logged), and this package answers with the outcome recorded.
type mcpOutcome struct{ e *surface.Error }

func (o *mcpOutcome) Error() string { return o.e.Error() }
func (o *mcpOutcome) Unwrap() error { return o.e }

// input is what a retry of a call carries from its previous round.
type input struct {
	responses mcp.InputResponseMap
	state     string
}

// outcome is what a handler asked the call to answer instead of the
// envelope.
type outcome struct {
	requests mcp.InputRequestMap
	state    string
	missing  *mcp.ClientCapabilities
}

// round records the request and input of a call's round (the SDK calls
// the handler again, in the same call, for each round of an older
// client) and forgets the outcome of the previous one.
func (f *inflight) round(req *mcp.CallToolRequest, in input) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.req, f.in, f.out = req, in, nil
}

// answerOf returns the MCP answer the handler asked for instead of res,
// if it did: an input request, or the protocol error of a missing client
// capability.
func (c *toolCall) answerOf(res surface.Result) (*mcp.CallToolResult, error, bool) {
	f, s := c.f, c.s
	if f == nil || code(res) != surface.CodePreconditionFailed {
		return nil, nil, false
	}
	f.mu.Lock()
	o := f.out
	f.mu.Unlock()
	reason := res.Error.Reason()
	switch {
	case o == nil:
		return nil, nil, false
	case o.missing != nil && reason == reasonMissingCapability:
		data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: o.missing})
		return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
			Message: "the client lacks a capability this tool needs", Data: data}, true
	case o.requests != nil && reason == reasonInputRequired:
		st := requestState{V: stateVersion, Srf: s.reg.SurfaceID(), Con: s.consumerKey, Tool: c.name, Args: argsDigest(c.req.Params.Arguments),
			Use: stateInput, App: o.state, Cap: res.CapabilityID}
		return &mcp.CallToolResult{InputRequests: o.requests, RequestState: s.sign(st)}, nil, true
	}
	return nil, nil, false
}

// errBadRequestState answers a retry whose request state does not
// verify for this call.
var errBadRequestState = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
	Message: "invalid requestState: it was not issued by this server for this call"}
