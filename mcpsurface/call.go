package mcpsurface

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
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
	res := s.call(ctx, at, cat, name, p.Arguments, metaString(p.Meta, MetaInvocationID), metaString(p.Meta, MetaConfirmationID))
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
	if code(res) == surface.CodeConfirmationRequired {
		rec := s.remember(cat, name, args, res)
		if s.elicit && elicitable(req) && ctx.Value(noElicitKey{}) == nil {
			cid := res.Error.ConfirmationID()
			if expiresAt, pending := s.expiry(cid); pending {
				at.invocationID, at.capabilityID = res.InvocationID, res.CapabilityID
				if f != nil { // older clients are asked while this call waits: until expiry at most
					f.expireAt(s, cid, expiresAt)
				}
				return s.elicitation(name, args, res, rec), nil
			}
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

// call runs one tool call through cat, the catalog the session was shown
// (direct mode). sentID is the client's invocation id, if it sent one;
// cid a confirmation id sent in _meta. at learns the invocation id used.
func (s *Server) call(ctx context.Context, at *attempt, cat *surface.Catalog, name string, args json.RawMessage, sentID, cid string) surface.Result {
	if s.meta {
		if cid != "" && name == surface.MetaAct {
			args = withFields(args, map[string]string{"confirmationId": cid})
		}
		return s.ts.Call(ctx, name, args, surface.CallOptions{ToolCallID: s.fresh(at, sentID)})
	}
	if cat == nil {
		cat = s.ts.Catalog()
	}
	if res, ok := s.callConfirmed(ctx, at, cat, name, args, sentID, cid); ok {
		return res
	}
	return cat.Call(ctx, name, args, surface.CallOptions{ToolCallID: s.fresh(at, sentID)})
}

// fresh returns the invocation id of a call that does not retry one this
// server issued a confirmation for: the client's, else a new one. at
// learns it.
func (s *Server) fresh(at *attempt, sentID string) string {
	at.invocationID = firstNonEmpty(sentID, s.newInvocationID())
	return at.invocationID
}

// callConfirmed runs a call (direct mode) that presents a confirmation:
// the one whose id the client sent in _meta (cid), or the one this server
// issued for the same call before. ok is false when the call presents
// none, or when the one it would present no longer applies.
func (s *Server) callConfirmed(ctx context.Context, at *attempt, cat *surface.Catalog, name string, args json.RawMessage, sentID, cid string) (res surface.Result, ok bool) {
	if cid != "" { // explicit evidence
		if rec := s.issued.byID(cid); rec != nil && rec.tool == name {
			if rec.key == callKey(name, args) { // the same call: its retry is idempotent
				return s.withEvidence(ctx, at, rec, args, firstNonEmpty(sentID, s.issued.invocation(rec))), true
			}
			return s.withEvidence(ctx, at, rec, args, s.fresh(at, sentID)), true // another call: the registry judges the evidence
		}
		t, ok := cat.Tool(name)
		if !ok { // not a tool the session was shown: the catalog answers
			return cat.Call(ctx, name, args, surface.CallOptions{ToolCallID: s.fresh(at, sentID)}), true
		}
		rec := &issued{confirmationID: cid, tool: name, capabilityID: t.CapabilityID, registrationID: t.RegistrationID, kind: t.Kind}
		return s.withEvidence(ctx, at, rec, args, s.fresh(at, sentID)), true
	}
	rec := s.issued.byCall(name, args)
	if rec == nil || sentID != "" {
		return surface.Result{}, false
	}
	// The same call again after CONFIRMATION_REQUIRED: present the
	// confirmation this server issued for it. (A client that sends
	// _meta sends the confirmation id too.)
	res = s.withEvidence(ctx, at, rec, args, s.issued.invocation(rec))
	var reason surface.Reason
	if code(res) == surface.CodeConfirmationInvalid {
		reason = res.Error.Reason()
	}
	if reason == "" || reason == surface.ReasonDenied {
		return res, true // executed, failed, still pending, or refused: the agent must learn it
	}
	return surface.Result{}, false // mismatch, consumed, expired: this is a new request
}

// withEvidence invokes the registration a confirmation was issued for,
// with the confirmation as evidence.
func (s *Server) withEvidence(ctx context.Context, at *attempt, rec *issued, args json.RawMessage, invID string) surface.Result {
	at.invocationID, at.capabilityID = invID, rec.capabilityID
	inv := surface.Invocation{
		InvocationID: invID, CapabilityID: rec.capabilityID, RegistrationID: rec.registrationID,
		SurfaceVersion: s.reg.Version(), ConfirmationID: rec.confirmationID,
	}
	same := invID == s.issued.invocation(rec) // a retry of the call that got the confirmation
	if same {
		inv.SurfaceVersion = s.issued.version(rec, inv.SurfaceVersion)
	}
	if rec.kind != surface.KindObservation {
		inv.Input = args
	}
	res := s.reg.Invoke(ctx, inv, surface.InvokeOptions{Consumer: s.consumer})
	if same && code(res) == surface.CodeConfirmationInvalid && res.Error.Reason() == surface.ReasonMismatch {
		// Nothing executed, and the approval stands for the input it
		// binds, which the call's effective input (live bound values
		// included) no longer is. The next retry is judged on its input
		// then, under an invocation id of its own: the first call's id
		// now replays this mismatch.
		s.issued.renew(rec, s.newInvocationID())
		return res
	}
	if same && code(res) != surface.CodeConfirmationRequired {
		// Settled: a duplicate retry by id replays this result, and an
		// identical call later is a new request.
		s.issued.settled(rec, inv.SurfaceVersion)
	}
	return res
}

// remember records a CONFIRMATION_REQUIRED this server returned (direct
// mode), so that a retry can present it. It returns the record, or nil.
func (s *Server) remember(cat *surface.Catalog, name string, args json.RawMessage, res surface.Result) *issued {
	if s.meta {
		return nil
	}
	cid := res.Error.ConfirmationID()
	if cid == "" {
		return nil
	}
	if rec := s.issued.byID(cid); rec != nil {
		return rec
	}
	rec := &issued{confirmationID: cid, tool: name, key: callKey(name, args), invocationID: res.InvocationID}
	for _, pc := range s.reg.Confirmations().Pending() {
		if pc.ConfirmationID == cid {
			rec.capabilityID, rec.registrationID = pc.CapabilityID, pc.RegistrationID
		}
	}
	var t surface.Tool
	ok := false
	if cat != nil {
		t, ok = cat.Tool(name)
	}
	if rec.registrationID == "" { // resolved already: fall back to the catalog
		if !ok {
			return nil
		}
		rec.capabilityID, rec.registrationID = t.CapabilityID, t.RegistrationID
	}
	rec.kind = surface.KindAction
	if ok {
		rec.kind = t.Kind
	}
	s.issued.add(rec)
	return rec
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

func callKey(name string, args json.RawMessage) string { return name + "\x00" + canonicalArgs(args) }

// issued is a confirmation this server returned to the agent.
type issued struct {
	confirmationID string
	tool           string
	key            string // callKey of the call that got it
	invocationID   string // of the call that got it, or a fresh one after a mismatch: retries reuse it (read through evidence.invocation)
	capabilityID   string
	registrationID string // retries target this registration
	kind           surface.Kind
	// evidenceVersion is the surface version of the first evidence
	// attempt that settled, so that a duplicate retry replays its result.
	evidenceVersion string
}

// maxIssued bounds the confirmations a server remembers.
const maxIssued = 256

// evidence remembers issued confirmations by id and by call. It is safe for
// concurrent use.
type evidence struct {
	mu    sync.Mutex
	ids   map[string]*issued
	calls map[string]*issued
	order []*issued // oldest first
}

func (e *evidence) add(rec *issued) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ids == nil {
		e.ids, e.calls = map[string]*issued{}, map[string]*issued{}
	}
	if len(e.order) >= maxIssued { // the registry expires them long before
		n := len(e.order) - maxIssued + 1
		for _, r := range e.order[:n] {
			e.dropLocked(r)
		}
		e.order = slices.Delete(e.order, 0, n)
	}
	e.order = append(e.order, rec)
	e.ids[rec.confirmationID] = rec
	if rec.key != "" {
		e.calls[rec.key] = rec
	}
}

func (e *evidence) dropLocked(r *issued) {
	delete(e.ids, r.confirmationID)
	if r.key != "" && e.calls[r.key] == r {
		delete(e.calls, r.key)
	}
}

func (e *evidence) byID(cid string) *issued {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ids[cid]
}

// byCall returns the confirmation issued for this call, if any. The key
// is computed only when some call has one.
func (e *evidence) byCall(name string, args json.RawMessage) *issued {
	e.mu.Lock()
	n := len(e.calls)
	e.mu.Unlock()
	if n == 0 {
		return nil
	}
	key := callKey(name, args)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[key]
}

// invocation returns the invocation id the retries of rec's call use.
func (e *evidence) invocation(rec *issued) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return rec.invocationID
}

// renew gives the retries of rec's call a new invocation id, id: the one
// they used settled without executing (a mismatch).
func (e *evidence) renew(rec *issued, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec.invocationID, rec.evidenceVersion = id, ""
}

// version returns the surface version an evidence attempt sends: the one
// of the first settled attempt, else current.
func (e *evidence) version(rec *issued, current string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return firstNonEmpty(rec.evidenceVersion, current)
}

// settled records that an evidence attempt of rec's own call settled.
func (e *evidence) settled(rec *issued, version string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rec.evidenceVersion == "" {
		rec.evidenceVersion = version
	}
	if rec.key != "" && e.calls[rec.key] == rec {
		delete(e.calls, rec.key)
	}
}
