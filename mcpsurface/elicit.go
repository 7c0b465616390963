package mcpsurface

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// confirmKey is the id of the confirmation input request.
const confirmKey = "confirm"

// approveSchema is the form of the confirmation elicitation.
var approveSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve","description":"Allow the agent to make this call."}},"required":["approve"]}`)

// requestState is what a confirmation elicitation carries from the first
// call to the re-call, signed.
type requestState struct {
	V    int    `json:"v"`
	Srf  string `json:"srf"`  // surface id: state is bound to its registry
	Con  string `json:"con"`  // consumer key: and to its consumer
	Tool string `json:"tool"` // the tool called
	Args string `json:"args"` // digest of the canonical arguments
	CID  string `json:"cid"`  // confirmation id
	Inv  string `json:"inv"`  // invocation id of the first call
	Cap  string `json:"cap"`  // capability id (direct) or the result's (meta)
	// Direct mode: the registration the confirmation was issued for and
	// the capability kind.
	Reg  string       `json:"reg,omitempty"`
	Kind surface.Kind `json:"kind,omitempty"`
	// Use is what the state is for: a confirmation (stateConfirm), or
	// the input a capability asked for (stateInput), whose own state is
	// App.
	Use string `json:"use,omitempty"`
	App string `json:"app,omitempty"`
	// Eid is the elicitationId of a URL-mode confirmation elicitation
	// (the approve page); empty for a form.
	Eid string `json:"eid,omitempty"`
}

// Uses of a request state.
const (
	stateConfirm = ""
	stateInput   = "input"
)

const stateVersion = 1

var stateDomain = []byte("agentsurface/mcpsurface/request-state\x00")

// sign encodes st as base64url(JSON) "." base64url(HMAC-SHA256).
func (s *Server) sign(st requestState) string {
	payload, _ := json.Marshal(st)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(s.mac(payload))
}

func (s *Server) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.opts.SigningKey)
	m.Write(stateDomain)
	m.Write(payload)
	return m.Sum(nil)
}

var errBadState = errors.New("mcpsurface: request state is invalid")

// verify checks a request state's signature and that it was issued by a
// server of this registry and consumer.
func (s *Server) verify(token string) (requestState, error) {
	var st requestState
	body, sig, ok := strings.Cut(token, ".")
	if !ok {
		return st, errBadState
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(payload)) {
		return st, errBadState
	}
	if json.Unmarshal(payload, &st) != nil || st.V != stateVersion || st.Srf != s.reg.SurfaceID() || st.Con != s.consumerKey ||
		(st.Use == stateConfirm && st.CID == "") || (st.Use != stateConfirm && st.Use != stateInput) {
		return requestState{}, errBadState
	}
	return st, nil
}

// verifyFor verifies a request state sent with a call of tool name with
// args: issued by this server, for that tool and those arguments.
func (s *Server) verifyFor(token, name string, args json.RawMessage) (requestState, bool) {
	st, err := s.verify(token)
	if err != nil || st.Tool != name || st.Args != argsDigest(args) {
		return requestState{}, false
	}
	return st, true
}

// argsDigest is the digest of a call's canonical arguments.
func argsDigest(args json.RawMessage) string {
	sum := sha256.Sum256([]byte(canonicalArgs(args)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// elicitable reports whether the calling client can answer a form
// elicitation. Older-protocol clients answer through elicitation/create,
// which stateless HTTP sessions cannot send: their synthesized
// initialization carries no capabilities, so they get two-phase.
func elicitable(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return false
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	return e.Form != nil || e.URL == nil // neither means form, for compatibility
}

// elicitation turns the CONFIRMATION_REQUIRED res of the call into an
// input request for the client, a form, with the signed state the
// re-call needs.
func (c *toolCall) elicitation(res surface.Result) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{confirmKey: &mcp.ElicitParams{Mode: "form", Message: asking(res.Error), RequestedSchema: approveSchema}},
		RequestState:  c.s.sign(c.confirmState(res)),
	}
}

// confirmState is the request state of a confirmation elicitation for
// the CONFIRMATION_REQUIRED res of the call.
func (c *toolCall) confirmState(res surface.Result) requestState {
	s := c.s
	st := requestState{
		V: stateVersion, Srf: s.reg.SurfaceID(), Con: s.consumerKey,
		Tool: c.name, Args: argsDigest(c.req.Params.Arguments), CID: res.Error.ConfirmationID(), Inv: res.InvocationID, Cap: res.CapabilityID,
	}
	if !s.meta() {
		if t, ok := c.catalog().Tool(c.name); ok {
			st.Reg, st.Kind, st.Cap = t.RegistrationID, t.Kind, t.CapabilityID
		}
	}
	return st
}

// asking is what the person is told a confirmation elicitation is
// about: the summary of the call, and its effect.
func asking(e *surface.Error) string {
	msg := "The agent asks to: " + e.Summary()
	if effect := e.Effect(); effect != "" {
		msg += " (" + string(effect) + ")"
	}
	return msg
}

// resume handles the re-call that carries the client's answer to a
// confirmation, with st its verified state. For a form, it resolves the
// registry's record; for the approve page (URL mode), the person decides
// there, and it waits for that (awaitPage). Then it retries with the
// evidence, as the asking call (the toolset remembers it; see
// toolCall.invoke). It never asks again.
func (c *toolCall) resume(ctx context.Context, st requestState) surface.Result {
	s, p := c.s, c.req.Params
	c.at.invocationID, c.at.capabilityID = st.Inv, st.Cap
	if st.Eid != "" {
		if res, ended := c.awaitPage(ctx, st); ended {
			return res
		}
		return c.linked(ctx, c.retry(ctx, st))
	}
	approve, action := answer(p.InputResponses[confirmKey])
	actor := "mcp-elicitation"
	if ci := c.req.ClientInfo(); ci != nil && ci.Name != "" {
		actor += ":" + ci.Name
	}
	resolution := surface.Resolution{Approved: approve, Actor: actor, Channel: surface.ChannelForm, Approver: surface.ApproverClient}
	if !approve {
		resolution.Reason = "elicitation " + action
	}
	resolved := s.reg.Confirmations().Resolve(st.CID, resolution)
	if !approve && !resolved {
		// Refused here, but resolved elsewhere meanwhile: a refusal never
		// executes.
		return surface.Result{Status: surface.StatusError, InvocationID: st.Inv, CapabilityID: st.Cap,
			Error: surface.NewReasonError(surface.CodeConfirmationInvalid, surface.ReasonDenied, ""), SurfaceVersion: s.reg.Version()}
	}
	return c.retry(ctx, st)
}

// retry calls again with the confirmation of st as evidence, under the
// asking call's invocation id.
func (c *toolCall) retry(ctx context.Context, st requestState) surface.Result {
	s, p := c.s, c.req.Params
	if s.meta() {
		args := withFields(p.Arguments, map[string]string{"confirmationId": st.CID, "invocationId": st.Inv})
		return s.ts.Call(ctx, c.name, args, surface.CallOptions{ToolCallID: st.Inv, Client: c.client})
	}
	return c.catalog().Call(ctx, c.name, p.Arguments, surface.CallOptions{ToolCallID: st.Inv, ConfirmationID: st.CID, Client: c.client})
}

// answer reads the client's answer to the confirmation form.
func answer(r mcp.InputResponse) (approve bool, action string) {
	er, ok := r.(*mcp.ElicitResult)
	if !ok || er == nil {
		return false, "missing"
	}
	v, _ := er.Content["approve"].(bool)
	return er.Action == "accept" && v, er.Action
}
