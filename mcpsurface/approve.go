package mcpsurface

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A confirmation reaches the person, per client, in the first of these
// ways its capabilities and the Options allow (issue 35, DESIGN decision
// 24), all resolving the same registry record:
//
//  1. the application's approve page, by URL-mode elicitation, when the
//     client declares elicitation.url and Options.ApproveURL gives a link
//     (unless Options.NoURLElicitation): the person decides on the page,
//     the client only opens it, so this needs no trust in the client;
//  2. a form the client shows (form-mode elicitation), with
//     Options.Elicit only: the client answers for the person;
//  3. otherwise the link in CONFIRMATION_REQUIRED (details.approveUrl and
//     the message), for the agent to hand to the person; without a link,
//     the answer is the registry's, unchanged.

// approveURLTimeout bounds a call of Options.ApproveURL.
const approveURLTimeout = 5 * time.Second

// confirm reaches the person for the CONFIRMATION_REQUIRED res of the
// call: it returns the elicitation to answer with (ok), or sets the
// approve link on res, if there is one.
func (c *toolCall) confirm(ctx context.Context, res *surface.Result) (elicit *mcp.CallToolResult, ok bool) {
	s := c.s
	if s.opts.ApproveURL == nil && !s.opts.Elicit {
		return nil, false
	}
	p, pending := s.pending(res.Error.ConfirmationID())
	if !pending { // a server's confirmation, or resolved meanwhile
		return nil, false
	}
	ask := ctx.Value(noElicitKey{}) == nil
	link, asked := "", false
	if ask && s.opts.ApproveURL != nil && !s.opts.NoURLElicitation && urlElicitable(c.req) {
		link, asked = s.approveURL(ctx, p), true
		if link != "" {
			return c.ask(*res, p.ExpiresAt, c.urlElicitation(*res, link)), true
		}
	}
	if ask && s.opts.Elicit && elicitable(c.req) {
		return c.ask(*res, p.ExpiresAt, c.elicitation(*res)), true
	}
	if !asked {
		link = s.approveURL(ctx, p)
	}
	res.Error = res.Error.WithApproveURL(link)
	return nil, false
}

// ask records that the call asks the client about the confirmation of
// res, and returns out, the question. An older client is asked while the
// call waits: until the confirmation expires at most.
func (c *toolCall) ask(res surface.Result, expiresAt time.Time, out *mcp.CallToolResult) *mcp.CallToolResult {
	c.at.invocationID, c.at.capabilityID = res.InvocationID, res.CapabilityID
	if c.f != nil {
		c.f.expireAt(c.s, res.Error.ConfirmationID(), expiresAt)
	}
	return out
}

// urlElicitation turns the CONFIRMATION_REQUIRED res of the call into a
// URL-mode input request that sends the person to link, the approve
// page, with the signed state the re-call needs.
func (c *toolCall) urlElicitation(res surface.Result, link string) *mcp.CallToolResult {
	st := c.confirmState(res)
	st.Eid = "eli_" + randid.Text()
	c.s.opts.Logger.Info("mcpsurface: sent the approve page by URL elicitation",
		"tool", c.name, "capabilityId", res.CapabilityID, "invocationId", res.InvocationID,
		"confirmationId", st.CID, "elicitationId", st.Eid)
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{confirmKey: &mcp.ElicitParams{
			Mode: "url", Message: asking(res.Error) + ". Open the page to approve or deny it.", URL: link, ElicitationID: st.Eid,
		}},
		RequestState: c.s.sign(st),
	}
}

// awaitPage handles the client's answer to a URL elicitation of the
// approve page, with st its verified state. The client decides nothing
// in URL mode: "accept" only says the person opened the page, so the call
// then waits for their decision there (the record leaving pending:
// approved, denied or expired), or for the call's context to end (it
// then returns its result: ended); decline and cancel resolve nothing and
// do not wait. A client is told the elicitation is complete once the
// record is resolved.
func (c *toolCall) awaitPage(ctx context.Context, st requestState) (res surface.Result, ended bool) {
	s := c.s
	action := "missing"
	if er, ok := c.req.Params.InputResponses[confirmKey].(*mcp.ElicitResult); ok && er != nil {
		action = er.Action
	}
	if action != "accept" {
		s.opts.Logger.Debug("mcpsurface: the approve page was not opened", "tool", c.name, "confirmationId", st.CID,
			"elicitationId", st.Eid, "action", action)
		return surface.Result{}, false
	}
	if !s.waits.begin(st.Eid) { // a replay of a round that is waiting: it answers at once
		return surface.Result{}, false
	}
	defer s.waits.end(st.Eid)
	outcome := s.reg.Confirmations().Wait(ctx, st.CID)
	if ctx.Err() != nil {
		return s.endedResult(ctx, *c.at), true
	}
	s.opts.Logger.Debug("mcpsurface: the approve page's confirmation left pending", "tool", c.name,
		"confirmationId", st.CID, "elicitationId", st.Eid, "outcome", string(outcome))
	c.elicitationComplete(ctx, st.Eid)
	return surface.Result{}, false
}

// elicitationComplete sends notifications/elicitation/complete for the
// URL elicitation eid to a client older than 2026-07-28, which answered
// elicitation/create and may wait for it. A 2026-07-28 client learns it
// from the result of its re-call.
func (c *toolCall) elicitationComplete(ctx context.Context, eid string) {
	ss := c.req.Session
	if ss == nil {
		return
	}
	if ip := ss.InitializeParams(); ip == nil || ip.ProtocolVersion >= sessionlessVersion {
		return
	}
	if err := ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: eid}); err != nil {
		c.s.opts.Logger.Debug("mcpsurface: notifications/elicitation/complete not sent", "elicitationId", eid, "error", err)
	}
}

// linked returns res with the approve link of its confirmation when res
// is a CONFIRMATION_REQUIRED still pending and Options.ApproveURL gives
// one.
func (c *toolCall) linked(ctx context.Context, res surface.Result) surface.Result {
	if code(res) != surface.CodeConfirmationRequired || c.s.opts.ApproveURL == nil {
		return res
	}
	if p, pending := c.s.pending(res.Error.ConfirmationID()); pending {
		res.Error = res.Error.WithApproveURL(c.s.approveURL(ctx, p))
	}
	return res
}

// approveURL calls Options.ApproveURL for the pending confirmation p,
// outside every lock, with ctx bounded by approveURLTimeout. A panic, an
// answer given after that context ended, and a link that is not an
// absolute http(s) URL without spaces or control characters are logged
// and give "" (no link).
func (s *Server) approveURL(ctx context.Context, p surface.PendingConfirmation) (link string) {
	if s.opts.ApproveURL == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, approveURLTimeout)
	defer cancel()
	defer func() {
		if rec := recover(); rec != nil {
			s.opts.Logger.Error("mcpsurface: Options.ApproveURL panicked; no approve link",
				"confirmationId", p.ConfirmationID, "panic", fmt.Sprint(rec))
			link = ""
		}
	}()
	link = s.opts.ApproveURL(ctx, p)
	switch {
	case link == "":
	case ctx.Err() != nil:
		s.opts.Logger.Warn("mcpsurface: Options.ApproveURL answered after its context ended; no approve link",
			"confirmationId", p.ConfirmationID, "error", context.Cause(ctx))
		link = ""
	case !showable(link):
		s.opts.Logger.Warn("mcpsurface: Options.ApproveURL gave a link that is not an absolute http(s) URL; no approve link",
			"confirmationId", p.ConfirmationID)
		link = ""
	}
	return link
}

// showable reports whether link is one to show a person and an agent: an
// absolute http or https URL with a host and no user information, without
// spaces or control characters (which could break out of the message
// that carries it), of at most 2048 bytes.
func showable(link string) bool {
	if len(link) > 2048 || strings.ContainsFunc(link, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return false
	}
	u, err := url.Parse(link)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil
}

// urlElicitable reports whether the calling client can be sent to a page
// by a URL-mode elicitation: it declared elicitation.url (at 2026-07-28,
// in the request's _meta; before, at initialization, on a session that
// can send elicitation/create).
func urlElicitable(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// pending returns the pending confirmation cid; pending is false once it
// has been resolved (or for an id the registry never issued).
func (s *Server) pending(cid string) (p surface.PendingConfirmation, pending bool) {
	if cid == "" {
		return p, false
	}
	for _, pc := range s.reg.Confirmations().Pending() {
		if pc.ConfirmationID == cid {
			return pc, true
		}
	}
	return p, false
}

// endedResult is the result of a call whose context ended while it
// waited: CONFIRMATION_INVALID expired, CANCELLED retry no for a Close,
// CANCELLED for the client's cancellation.
func (s *Server) endedResult(ctx context.Context, at attempt) surface.Result {
	var exp *expired
	switch cause := context.Cause(ctx); {
	case errors.As(cause, &exp):
		return s.expiredResult(at)
	case errors.Is(cause, errServerClosed), errors.Is(cause, errSessionClosed):
		return s.closedResult(at, cause)
	}
	return surface.Result{Status: surface.StatusError, InvocationID: firstNonEmpty(at.invocationID, s.newInvocationID()),
		CapabilityID: at.capabilityID, Error: surface.NewError(surface.CodeCancelled, "", nil), SurfaceVersion: s.reg.Version()}
}

// pageWaits are the URL elicitations whose re-call waits for the
// person's decision, by elicitationId: one round waits per elicitation,
// so replaying its request state holds nothing more.
type pageWaits struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// begin reports whether the caller may wait for elicitation eid: no
// other round does.
func (w *pageWaits) begin(eid string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, busy := w.ids[eid]; busy {
		return false
	}
	if w.ids == nil {
		w.ids = map[string]struct{}{}
	}
	w.ids[eid] = struct{}{}
	return true
}

// end ends the wait begin allowed.
func (w *pageWaits) end(eid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ids, eid)
	w.ids = orNil(w.ids)
}
