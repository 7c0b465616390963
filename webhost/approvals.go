package webhost

// The approvals inbox: the confirmations a session's agents asked for,
// the user's decisions on them, and what became of the calls that
// presented the approvals. The calls are followed through the registry's
// telemetry: a call that presents approved evidence, and its settlement,
// are linked by their invocation id, whatever the consumer and the kind
// of capability (an action's handler or a procedure's executor).

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// ApprovalsID is the element id of the approvals fragment: a page that
// has an element with this id and the data-fragment attribute shows the
// session's approvals there, live (the Host's default card, or
// Options.RenderApprovals).
const ApprovalsID = "agentsurface-approvals"

// maxDecisions is how many decisions a session keeps.
const maxDecisions = 100

// Decision is what became of a confirmation request of the session: a
// user's approval or denial (with [Session.Decide] or in the page), an
// approval or denial made elsewhere, or its expiry; and, for an approval,
// the call it let through.
type Decision struct {
	ConfirmationID string `json:"confirmationId"`
	CapabilityID   string `json:"capabilityId"`
	// Consumer is the key (kind:id) of the consumer that asked.
	Consumer string `json:"consumer"`
	Summary  string `json:"summary"`
	// Input is the exact effective input that was approved or denied.
	Input surface.JSONText `json:"input"`
	// Outcome is approved, denied or expired.
	Outcome surface.ConfirmationOutcome `json:"outcome"`
	// Actor is who decided: the actor given to Decide, "" when the
	// request expired or was resolved outside the Host (through the
	// registry's Confirmations, or an MCP client's elicitation).
	Actor string `json:"actor,omitempty"`
	// Channel is how the person was reached when the Host took the
	// decision: the page's approvals card (page), the approve page
	// reached by a link (link) or by URL-mode elicitation (url), or the
	// approve page opened with the session's cookie (page). "" for a
	// decision made with Decide, elsewhere, or an expiry.
	Channel surface.Channel `json:"channel,omitempty"`
	At      time.Time       `json:"at"`
	// Call is the call that presented the approval, once one did; nil
	// before (and for denials and expiries).
	Call *CallOutcome `json:"call,omitempty"`

	view surface.PendingConfirmation // the request as it was pending: what an approve link was signed over
}

// CallOutcome is what became of the call that presented an approval:
// the approval is not the outcome, the call may still fail.
type CallOutcome struct {
	InvocationID string `json:"invocationId"`
	// Settled is false while the call runs.
	Settled bool                 `json:"settled"`
	Status  surface.ResultStatus `json:"status,omitempty"`
	// Code is the error code of a call that failed.
	Code surface.Code `json:"code,omitempty"`
	// Executed reports whether the handler or the procedure ran (and the
	// approval was spent); a call refused before (a precondition, a full
	// queue) leaves the approval standing until it expires.
	Executed bool `json:"executed"`
}

// Approvals is what the approvals fragment shows.
type Approvals struct {
	// Pending are the requests waiting for the user, oldest first.
	Pending []surface.PendingConfirmation
	// Decisions are the decisions kept, newest first.
	Decisions []Decision
	// Action is where the card's form posts: fields "id" (the
	// confirmation id) and "decision" ("approve", "deny", or "grant"
	// with "minutes": see [Host.DecidePath]).
	Action string
	// Offers are the standing grants the card may offer with an
	// approval ("approve, and allow this for N minutes"), by
	// confirmation id: those the approve page offers ([Session.GrantOffer]).
	// A request whose capability allows none has no entry.
	Offers map[string]*GrantOffer
}

// Pending returns the confirmations waiting for the user, oldest first.
func (s *Session) Pending() []surface.PendingConfirmation {
	return s.reg.Confirmations().Pending()
}

// Decide approves or denies the pending confirmation id of this session
// on behalf of actor (recorded in the audit trail and the decisions). It
// reports false, and does nothing, when id is not pending in this
// session: unknown, another session's, decided already or expired.
func (s *Session) Decide(id string, approve bool, actor string) (Decision, bool) {
	d, _, err := s.decide(id, surface.Resolution{Approved: approve, Actor: actor})
	return d, err == nil
}

// decider is who is deciding a request, while Resolve runs.
type decider struct {
	actor   string
	channel surface.Channel
}

// decide resolves the pending confirmation id of this session as res
// says (with the grant res.Grant asks for, if any) and records the
// decision. It fails surface.ErrNotPending when id is not pending in this
// session, and with the *surface.GrantError of a refused grant (the
// request then stays pending).
func (s *Session) decide(id string, res surface.Resolution) (Decision, surface.Grant, error) {
	p, ok := s.pendingView(id)
	if !ok {
		return Decision{}, surface.Grant{}, surface.ErrNotPending
	}
	s.mu.Lock()
	if s.deciding == nil {
		s.deciding = map[string]decider{}
	}
	s.deciding[id] = decider{res.Actor, res.Channel}
	s.mu.Unlock()
	g, err := s.reg.Confirmations().ResolveGrant(id, res)
	s.mu.Lock()
	delete(s.deciding, id)
	var d Decision
	if err == nil {
		outcome := surface.OutcomeDenied
		if res.Approved {
			outcome = surface.OutcomeApproved
		}
		d = s.recordLocked(p, outcome, decider{res.Actor, res.Channel}) // unless the resolution's event recorded it first
	}
	s.mu.Unlock()
	if err == nil {
		s.Changed(ApprovalsID)
	}
	return d, g, err
}

// pendingView returns the request id while it is pending in this
// session.
func (s *Session) pendingView(id string) (surface.PendingConfirmation, bool) {
	for _, x := range s.reg.Confirmations().Pending() {
		if x.ConfirmationID == id {
			return x, true
		}
	}
	return surface.PendingConfirmation{}, false
}

// Decisions returns the session's decisions, oldest first, each with the
// outcome of the call its approval let through, as far as known.
func (s *Session) Decisions() []Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.decisions)
	for i := range out {
		if c, ok := s.calls[out[i].ConfirmationID]; ok {
			out[i].Call = &c
		}
	}
	return out
}

// Approvals returns what the approvals fragment shows now.
func (s *Session) Approvals() Approvals {
	ds := s.Decisions()
	slices.Reverse(ds)
	a := Approvals{Pending: s.Pending(), Decisions: ds, Action: s.h.DecidePath()}
	for _, p := range a.Pending {
		if o := grantOffer(s, p); o != nil {
			if a.Offers == nil {
				a.Offers = map[string]*GrantOffer{}
			}
			a.Offers[p.ConfirmationID] = o
		}
	}
	return a
}

// RenderApprovals writes the approvals fragment's HTML, as the event
// stream sends it: for the first render of a page.
func (s *Session) RenderApprovals(w io.Writer) error { return s.h.renderApprovals(w, s) }

// recordLocked records the decision on p once, and returns it; s.mu is
// held.
func (s *Session) recordLocked(p surface.PendingConfirmation, outcome surface.ConfirmationOutcome, by decider) Decision {
	for _, d := range s.decisions {
		if d.ConfirmationID == p.ConfirmationID {
			return d
		}
	}
	d := Decision{ConfirmationID: p.ConfirmationID, CapabilityID: p.CapabilityID, Consumer: p.ConsumerKey,
		Summary: p.Summary, Input: p.Input, Outcome: outcome, Actor: by.actor, Channel: by.channel, At: time.Now(), view: p}
	s.decisions = append(s.decisions, d)
	if n := len(s.decisions) - maxDecisions; n > 0 {
		s.decisions = slices.Delete(s.decisions, 0, n)
	}
	if len(s.calls) > 2*maxDecisions { // keep those of the decisions kept
		for k := range s.calls {
			if !slices.ContainsFunc(s.decisions, func(d Decision) bool { return d.ConfirmationID == k }) {
				delete(s.calls, k)
			}
		}
	}
	return d
}

// requested keeps a new request's public view, for its decision, makes
// it known to the Host (Host.ApproveURL), and has the notifier tell the
// user.
func (s *Session) requested(id string) {
	if p, ok := s.pendingView(id); ok {
		s.mu.Lock()
		if s.known == nil {
			s.known = map[string]surface.PendingConfirmation{}
		}
		kept := len(s.known) < 4*s.reg.Limits().MaxPendingConfirmations+16
		if kept {
			s.known[id] = p
		}
		s.mu.Unlock()
		if kept {
			s.h.confirmingAdd(s, id)
		}
		s.h.notifyConfirmation(s, p)
	}
	s.Changed(ApprovalsID)
}

// resolved records how a request left pending: decided with Decide (if
// Decide has not recorded it yet), elsewhere, or expired.
func (s *Session) resolved(id string, outcome surface.ConfirmationOutcome) {
	s.h.confirmingRemove(s, id)
	s.mu.Lock()
	p, ok := s.known[id]
	delete(s.known, id)
	if ok {
		by, deciding := s.deciding[id]
		if !deciding || outcome == surface.OutcomeExpired {
			by = decider{}
		}
		s.recordLocked(p, outcome, by)
	}
	s.mu.Unlock()
	s.Changed(ApprovalsID)
}

// confirmingAdd records that the request id is pending in s, while s
// is live.
func (h *Host) confirmingAdd(s *Session, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dir.byID[s.id] != s { // ended: forget has purged its requests already
		return
	}
	if h.confirming == nil {
		h.confirming = map[string]*Session{}
	}
	h.confirming[id] = s
}

// confirmingRemove forgets that the request id is pending in s.
func (h *Host) confirmingRemove(s *Session, id string) {
	h.mu.Lock()
	if h.confirming[id] == s {
		delete(h.confirming, id)
	}
	h.mu.Unlock()
}

// unregistered expires the pending requests of a registration that went
// away: resolution precedes confirmation, so approving one could never
// let a call through. The page shows them expired.
func (s *Session) unregistered(registrationID string) {
	for _, p := range s.reg.Confirmations().Pending() {
		if p.RegistrationID == registrationID {
			s.reg.Confirmations().Expire(p.ConfirmationID)
		}
	}
}

// observe wraps the registry's telemetry (the application's, if any) to
// follow the calls that present confirmation evidence.
func (s *Session) observe(app *surface.Telemetry) *surface.Telemetry {
	t := &surface.Telemetry{}
	if app != nil {
		*t = *app
	}
	next := t.Invocation
	t.Invocation = func(ctx context.Context, info surface.InvocationInfo) (context.Context, surface.InvocationRecorder) {
		var rec surface.InvocationRecorder
		if next != nil {
			ctx, rec = next(ctx, info)
		}
		if info.ConfirmationID == "" {
			return ctx, rec
		}
		return ctx, &presented{s: s, next: rec, invocation: info.InvocationID, confirmation: info.ConfirmationID}
	}
	return t
}

// presented records the call of one invocation that presented evidence.
// Its methods are called on the invoking goroutine, one at a time.
type presented struct {
	s                        *Session
	next                     surface.InvocationRecorder
	invocation, confirmation string
	accepted                 bool
}

func (p *presented) Phase(e surface.PhaseEvent) {
	if e.Phase == surface.PhaseConfirmationPresented && !e.ApprovedAt.IsZero() {
		p.accepted = true
		p.s.called(p.confirmation, CallOutcome{InvocationID: p.invocation})
	}
	if p.next != nil {
		p.next.Phase(e)
	}
}

func (p *presented) Settle(st surface.Settlement) {
	if p.accepted {
		c := CallOutcome{InvocationID: p.invocation, Settled: true, Status: st.Status, Executed: st.Executed}
		if st.Error != nil {
			c.Code = st.Error.Code
		}
		p.s.called(p.confirmation, c)
	}
	if p.next != nil {
		p.next.Settle(st)
	}
}

// called records what became of the call that presented confirmation id.
func (s *Session) called(id string, c CallOutcome) {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]CallOutcome{}
	}
	s.calls[id] = c
	s.mu.Unlock()
	s.Changed(ApprovalsID)
}

// DecidePath is where the approvals card's form posts (Options.Prefix +
// "decide"), with the fields "id" and "decision" ("approve", "deny", or
// "grant" with "minutes"): the session of the request's cookie decides,
// if id is pending in it. "grant" approves with the standing grant the
// Host offers for the request ([Session.GrantOffer]), for one of the
// durations it offers: nothing else of the form is read, so the scope
// and constraints are the Host's own derivation from the pending
// request, as on the approve page. Otherwise the answer is 409 for a
// request of the session that was decided already or expired, or whose
// grant the registry refused (nothing is decided then), 400 for a grant
// not offered, and 404 ("There is no such approval request in this
// session.") for any other id, another session's included. The approve
// page of one request ([Host.ApprovePath], [Session.ApproveURL]) is a
// route beside it.
func (h *Host) DecidePath() string { return h.opts.Prefix + "decide" }

// serveDecide decides a pending confirmation of the request's session.
func (h *Host) serveDecide(w http.ResponseWriter, r *http.Request) {
	s := SessionFrom(r.Context())
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id := r.PostForm.Get("id")
	res := surface.Resolution{Actor: h.actor(r, s, surface.ChannelPage), Channel: surface.ChannelPage, Approver: surface.ApproverUser}
	switch r.PostForm.Get("decision") {
	case "approve":
		res.Approved = true
	case "deny":
	case "grant":
		p, ok := s.pendingView(id)
		if !ok {
			status, msg := decideRefusal(s, id)
			http.Error(w, msg, status)
			return
		}
		spec, msg := grantChosen(grantOffer(s, p), r.PostForm.Get("minutes"))
		if spec == nil {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		res.Approved, res.Grant = true, spec
	default:
		http.Error(w, `decision must be "approve", "deny" or "grant"`, http.StatusBadRequest)
		return
	}
	_, _, err := s.decide(id, res)
	var ge *surface.GrantError
	switch {
	case errors.As(err, &ge):
		http.Error(w, "The standing grant was refused ("+ge.Message+"). Nothing was approved: the request still waits.", http.StatusConflict)
		return
	case err != nil:
		status, msg := decideRefusal(s, id)
		http.Error(w, msg, status)
		return
	}
	h.Posted(w, r)
}

// grantChosen returns the grant of offer for the duration a form chose
// (minutes, one of offer.Minutes), or nil and why not.
func grantChosen(offer *GrantOffer, minutes string) (*surface.GrantSpec, string) {
	if offer == nil {
		return nil, "This request offers no standing grant."
	}
	m, err := strconv.Atoi(minutes)
	if err != nil || !slices.Contains(offer.Minutes, m) {
		return nil, "Pick one of the durations offered."
	}
	return &surface.GrantSpec{Constraints: offer.Constraints, TTL: time.Duration(m) * time.Minute, MaxUses: offer.MaxUses}, ""
}

// actor names who decides in the request r of session s, reached by
// channel: Options.Actor, or the session's user ("anonymous" without
// one) and the channel.
func (h *Host) actor(r *http.Request, s *Session, channel surface.Channel) string {
	if h.opts.Actor != nil {
		return h.opts.Actor(r, s)
	}
	return cmp.Or(s.User(), "anonymous") + " (" + string(channel) + ")"
}

// decideRefusal says why confirmation id could not be decided in s, from
// what s knows alone: decided already or expired (409), or no such
// request in this session (404), the answer to an unknown id and to
// another session's alike, so that nothing about other sessions leaks.
func decideRefusal(s *Session, id string) (int, string) {
	for _, d := range s.Decisions() {
		if d.ConfirmationID != id {
			continue
		}
		switch d.Outcome {
		case surface.OutcomeExpired:
			return http.StatusConflict, "This request expired before anyone decided: nothing ran."
		case surface.OutcomeDenied:
			return http.StatusConflict, "This request was denied already" + by(d.Actor) + "."
		}
		return http.StatusConflict, "This request was approved already" + by(d.Actor) + "."
	}
	return http.StatusNotFound, "There is no such approval request in this session."
}

func by(actor string) string {
	if actor == "" {
		return ""
	}
	return " by " + actor
}

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"pretty": prettyJSON,
	"clock":  func(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" },
	"result": callResult,
}).ParseFS(templateFS, "templates/*.html"))

// renderApprovals renders the approvals fragment of s.
func (h *Host) renderApprovals(w io.Writer, s *Session) error {
	a := s.Approvals()
	if h.opts.RenderApprovals != nil {
		return h.opts.RenderApprovals(w, s, a)
	}
	return templates.ExecuteTemplate(w, "approvals", a)
}

// prettyJSON indents a JSON text for the card.
func prettyJSON(t surface.JSONText) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(t), "", "  ") != nil {
		return string(t)
	}
	return b.String()
}

// result is what became of the call a decision let through, and a class
// for it: good, failed or pending.
type result struct{ Text, Class string }

func callResult(d Decision) result {
	switch {
	case d.Outcome == surface.OutcomeExpired:
		return result{"expired before anyone decided: nothing ran", "failed"}
	case d.Outcome == surface.OutcomeDenied:
		return result{"nothing ran", "failed"}
	case d.Call == nil:
		return result{"the call has not run yet", "pending"}
	case !d.Call.Settled:
		return result{"running", "pending"}
	case d.Call.Code != "":
		return result{"refused: " + string(d.Call.Code), "failed"}
	}
	return result{"done", "good"}
}
