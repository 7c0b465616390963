package webhost

// The approve page: one confirmation request of a session, shown to the
// person it is for with its exact input, decided with a click — never on
// GET. It is reached three ways:
//
//   - from the session's own browser, by its cookie ([Host.ApprovePath]);
//   - by an approve link handed to the agent or its client (in
//     CONFIRMATION_REQUIRED, by URL-mode elicitation: [Session.ApproveURL]),
//     which opens only for the session's user: signed in as that user
//     with Options.User, else in a browser of the session (its cookie).
//     The agent holds this link: were it enough by itself, a client
//     could approve its own call;
//   - by a notified link, which the notifier sends to the user directly
//     (a chat message: [NotifierOptions]) and no agent sees, which
//     opens in any browser (with Options.User, for the session's user
//     signed in).
//
// A link is the page's path and the query link=<session id>.<kind>.<
// signature>, kind "u" (the user's) or "n" (notified). The signature is
// an HMAC-SHA256, keyed with a random key of this process, over the kind,
// the confirmation id, the session's public id and user, and a digest of
// the request as it is pending (its capability, registration, consumer,
// effect, exact input, request and expiry times): it names one request
// of one session of one user, and nothing else verifies. It lives as long
// as the request: once the request is decided (through the link or
// elsewhere) or expired, the link opens only a page saying so (410); it
// never decides twice, since the registry resolves a request once. It
// never binds the browser to the session (no cookie is set): it reaches
// that one request.
//
// Replicas: the link names its session by the public id, which the
// session's owner claims in the replicas' directory with its other
// credentials (as routeSecret, which grants nothing by itself), so any
// replica forwards the link to the owner, which alone holds the request
// and verifies the signature. The key therefore need not be shared.
//
// Refusals are pages with a status and a reason ([ApproveRefusal]). An
// unknown request, another session's, a malformed or forged link all
// get the same 404, so that the page is no oracle about other sessions;
// a genuine link gets the more precise answers (401 not signed in, or
// not in the session's browser; 403 another user, or another session's
// browser; 410 decided or expired). Every refusal is logged at warn (the
// log never holds a link's signature) and counted; one that the Host can
// tell is about a request of a session (a genuine link, a post that
// decides nothing) also goes to that session's audit trail
// ([AuditApproveRefused]).

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	_ "embed" // the approve page's stylesheet
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
)

//go:embed static/approve.css
var approveCSS []byte

// Query parameters of an approve link.
const (
	// linkParam carries the link's session id and signature.
	linkParam = "link"
	// viaParam, "url", marks a link an MCP client opened by URL-mode
	// elicitation: its decision is recorded with surface.ChannelURL
	// instead of ChannelLink. It is not signed: it only labels the
	// channel in the audit trail.
	viaParam = "via"
)

// ApproveRefusal says why the approve page refused a request.
type ApproveRefusal string

// Approve page refusals, by HTTP status.
const (
	// RefuseNotFound (404): no such request pending or decided in the
	// session, another session's request, a malformed or forged link.
	// They answer alike, so that nothing about other sessions leaks.
	RefuseNotFound ApproveRefusal = "not-found"
	// RefuseSignIn (401): no credential (neither the session's cookie
	// nor a link), Options.User refused the request, or (without
	// Options.User) a link handed to the agent opened in a browser that
	// holds no session's cookie.
	RefuseSignIn ApproveRefusal = "sign-in"
	// RefuseOtherUser (403): the request's user is not the session's
	// (without Options.User: a link handed to the agent opened in another
	// session's browser).
	RefuseOtherUser ApproveRefusal = "other-user"
	// RefuseCrossOrigin (403): a cross-origin post.
	RefuseCrossOrigin ApproveRefusal = "cross-origin"
	// RefuseDecided (410): the request was approved or denied already
	// (the link was used, or the page decided it).
	RefuseDecided ApproveRefusal = "decided"
	// RefuseExpired (410): the request expired before anyone decided.
	RefuseExpired ApproveRefusal = "expired"
	// RefuseBadForm (400): a post whose decision, or grant duration, is
	// not one the page offered.
	RefuseBadForm ApproveRefusal = "bad-form"
	// RefuseGrant (409): the standing grant asked for was refused (the
	// capability's ceiling changed meanwhile, the grant store is full);
	// nothing was approved and the request still waits.
	RefuseGrant ApproveRefusal = "grant-refused"
	// RefuseUnavailable (503): the session cannot be used now (every
	// session has an open page).
	RefuseUnavailable ApproveRefusal = "unavailable"
)

// ApprovePage is what the approve page shows: the request and the form
// (Ask), the decision just taken (Decision), or a refusal (Refusal).
type ApprovePage struct {
	// Status is the HTTP status of the answer.
	Status int
	// Session is the request's session; nil when the page refuses before
	// one is known (RefuseNotFound, RefuseSignIn without a link).
	Session *Session
	// Request is the confirmation request: what exactly the person is
	// asked to approve. Zero when Refusal is RefuseNotFound, RefuseSignIn
	// or RefuseOtherUser.
	Request surface.PendingConfirmation
	// Ask is set while the request waits for the decision: the page
	// shows the form, which posts to Action.
	Ask bool
	// Action is where the form posts: the page's own path, with its link.
	Action string
	// Grant is what "approve, and allow this for N minutes" would allow;
	// nil when the capability allows no standing grant.
	Grant *GrantOffer
	// Decision is the decision taken by the post this page answers, or
	// the earlier one of a request decided already (RefuseDecided).
	Decision *Decision
	// Granted is the standing grant made with the approval, if any.
	Granted *surface.Grant
	// Refusal is why the page refuses, "" when it does not; Message says
	// it to the person.
	Refusal ApproveRefusal
	Message string
	// Stylesheet is the path of the default page's stylesheet.
	Stylesheet string
}

// GrantOffer is the standing grant the approve page offers with an
// approval ("approve, and allow this for N minutes"), derived by the
// Host from the approved request, never from the form: for the approved
// call's consumer, capability and instance only; for inputs that set the
// same members as the approved one and no other, each holding only
// values the approved input held (for a list, each element among the
// approved elements, and never an empty list); for a duration the person
// picks among Minutes; for at most MaxUses calls. A call outside it asks
// again.
type GrantOffer struct {
	// Minutes are the durations offered, shortest first: those of 5, 15
	// and 60 minutes within the capability's ceiling, and the ceiling
	// itself (in whole minutes) when it is under 60.
	Minutes []int
	// MaxUses is the most calls the grant lets through (the
	// capability's ceiling); 0 for no cap but the time.
	MaxUses int
	// Consumer is the one consumer (kind:id) the grant is for.
	Consumer string
	// Constraints are the grant's constraints, exactly as the Host
	// creates them.
	Constraints []surface.Constraint
	// Terms say the constraints in plain words, one a line.
	Terms []string
}

// ApprovePath returns the path of the approve page of the confirmation
// request id (Options.Prefix + "approve/" + id), for the session's own
// browser: it opens with the session's cookie. Elsewhere, hand out the
// approve link ([Session.ApproveURL]).
func (h *Host) ApprovePath(id string) string {
	return h.opts.Prefix + "approve/" + url.PathEscape(id)
}

// linkKind is who an approve link is for.
type linkKind byte

const (
	// linkForUser: handed to the agent or its client; it opens for the
	// session's user only (signed in, or in the session's browser).
	linkForUser linkKind = 'u'
	// linkNotified: sent to the user by the notifier, which no agent
	// sees; it opens in any browser (for the session's user signed in,
	// with Options.User).
	linkNotified linkKind = 'n'
)

// ApproveURL returns the approve link of the confirmation request p of
// this session, to hand to the agent that asked or to its client: in
// CONFIRMATION_REQUIRED's details and message, or as the URL of a
// URL-mode elicitation. It opens the approve page of p, and only of p,
// until p is decided or expires, and only for the session's user: signed
// in as the session's user with Options.User; without it, in a browser
// of the session (one holding its cookie). So the agent, which holds
// the link, cannot approve its own call with it, and a person still has
// to click. (The notifier's link, which goes to the user directly, opens
// in any browser: [NotifyFunc].)
//
// It is absolute with Options.PublicURL, else a path. A URL-mode
// elicitation may append "&via=url", which records the decision's
// channel as surface.ChannelURL instead of ChannelLink. It returns ""
// when p is not pending in this session (decided, expired, another
// session's, the session ended). The link is not logged.
func (s *Session) ApproveURL(p surface.PendingConfirmation) string {
	return s.approveURL(p, linkForUser, s.h.opts.PublicURL)
}

// approveURL returns the approve link of kind of the request p of s,
// under base (Options.PublicURL, the base derived from an MCP request,
// or "" for a path), or "" when p is not pending in s.
func (s *Session) approveURL(p surface.PendingConfirmation, kind linkKind, base string) string {
	v, ok := s.pendingView(p.ConfirmationID)
	if !ok || !sameRequest(v, p) {
		return ""
	}
	h := s.h
	q := url.Values{linkParam: {s.id + "." + string(kind) + "." + base64.RawURLEncoding.EncodeToString(h.linkMAC(s, v, kind))}}
	return base + h.ApprovePath(v.ConfirmationID) + "?" + q.Encode()
}

// ApproveURL returns the approve link of the confirmation request p of
// whichever session of this Host it is pending in ([Session.ApproveURL]),
// or "" when it is pending in none. Its shape is that of
// mcpsurface.Options.ApproveURL, a hook that knows only the call and the
// request, and the Host sets it as that hook of its MCP endpoint (unless
// Options.MCP.HTTP sets one), so that every MCP client of every session
// reaches the person: by URL-mode elicitation where the client declares
// it, by the link in CONFIRMATION_REQUIRED otherwise.
//
// Outside an MCP tool call (ctx without mcpsurface.RequestFromContext)
// it is Session.ApproveURL: absolute with Options.PublicURL, else a
// path. Within one, which is how the MCP endpoint calls it:
//
//   - the link is absolute: under Options.PublicURL when it is set, else
//     under the scheme and Host of the MCP request that made the call
//     (https when it came over TLS to this server, else http; the Host
//     header only, never X-Forwarded-Host or X-Forwarded-Proto, which
//     any client can send). The Host guard has already refused a Host
//     outside loopback and Options.AllowedHosts, and a client that names
//     another allowed Host only changes the link it gets itself, which
//     opens for the session's user only. Behind a proxy that terminates
//     TLS, or whose public name the replicas do not see, set PublicURL;
//     where neither gives a base (a call that came over no HTTP request
//     of this Host) it returns "", and mcpsurface leaves the answer as
//     it was, without a link;
//   - for the call's URL-mode elicitation it appends "&via=url", so that
//     the decision is recorded with surface.ChannelURL. mcpsurface does
//     not say what it asks a link for: the Host infers it as mcpsurface
//     decides, from the call's first round (no request state) of a
//     client that declares elicitation.url, with URL elicitation not
//     turned off (Options.MCP.HTTP.NoURLElicitation). A link given after
//     such a client declined the page (its re-call carries request
//     state) is labelled link. The label is not signed and grants
//     nothing: it only names the channel in the audit trail.
func (h *Host) ApproveURL(ctx context.Context, p surface.PendingConfirmation) string {
	s := h.pendingIn(p.ConfirmationID)
	if s == nil {
		return ""
	}
	req := mcpsurface.RequestFromContext(ctx)
	if req == nil {
		return s.ApproveURL(p)
	}
	base := h.opts.PublicURL
	if base == "" {
		base = mcpBase(req)
	}
	if base == "" {
		return ""
	}
	link := s.approveURL(p, linkForUser, base)
	if link != "" && h.urlElicited(req) {
		link += "&" + viaParam + "=url"
	}
	return link
}

// pendingIn returns the session the confirmation request id is pending
// in, or nil.
func (h *Host) pendingIn(id string) *Session {
	h.mu.Lock()
	s := h.confirming[id]
	h.mu.Unlock()
	if s != nil {
		return s
	}
	for _, x := range h.all() { // its event may not have reached the session yet
		if _, ok := x.pendingView(id); ok {
			return x
		}
	}
	return nil
}

// sameRequest reports whether p, as a caller gave it, names the request
// v: its id, and whichever of its other identifying fields it sets.
func sameRequest(v, p surface.PendingConfirmation) bool {
	eq := func(a, b string) bool { return b == "" || a == b }
	if !eq(v.RegistrationID, p.RegistrationID) || !eq(v.CapabilityID, p.CapabilityID) || !eq(v.ConsumerKey, p.ConsumerKey) {
		return false
	}
	if len(p.Input) == 0 {
		return true
	}
	var a, b bytes.Buffer
	return json.Compact(&a, []byte(v.Input)) == nil && json.Compact(&b, []byte(p.Input)) == nil && bytes.Equal(a.Bytes(), b.Bytes())
}

// routeSecret is what names a session to the replicas' directory for
// its approve links: derived from its public id, which the links carry.
// It grants nothing (the owner checks the link's signature); it only
// lets any replica forward a link to the session's owner.
func routeSecret(sessionID string) string { return "agentsurface approve route\x00" + sessionID }

// linkMAC signs the approve link of kind of the request v of s.
func (h *Host) linkMAC(s *Session, v surface.PendingConfirmation, kind linkKind) []byte {
	m := hmac.New(sha256.New, h.linkKey)
	field := func(b []byte) {
		var n [binary.MaxVarintLen64]byte
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		m.Write(b)
	}
	digest := requestDigest(v)
	for _, f := range [...][]byte{[]byte("agentsurface approve link v1"), {byte(kind)}, []byte(v.ConfirmationID), []byte(s.id), []byte(s.user), digest[:]} {
		field(f)
	}
	return m.Sum(nil)
}

// requestDigest is the SHA-256 of what a request binds a decision to:
// its capability, registration, consumer, effect and exact input (the
// fields of the registry's own digest but the registry's id, which one
// session's registry has alone), and when it was requested and expires.
func requestDigest(v surface.PendingConfirmation) [32]byte {
	d := sha256.New()
	for _, f := range [...]string{v.CapabilityID, v.RegistrationID, v.ConsumerKey, string(v.Effect), string(v.Input),
		strconv.FormatInt(v.RequestedAt.UnixNano(), 10), strconv.FormatInt(v.ExpiresAt.UnixNano(), 10)} {
		var n [binary.MaxVarintLen64]byte
		d.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		d.Write([]byte(f))
	}
	var out [32]byte
	d.Sum(out[:0])
	return out
}

// approveTarget is what an approve-page request reaches once its
// credentials were checked: a request of a session, and how.
type approveTarget struct {
	s       *Session
	channel surface.Channel
	action  string // where the form posts
	view    surface.PendingConfirmation
}

// approveRefusal is a refused approve-page request: the page, and what
// the log and the audit trail say of it.
type approveRefusal struct {
	page    ApprovePage
	why     string // for the log
	session string // the session's public id, when known
	// trail, when set, is the session whose audit trail records the
	// refusal (AuditApproveRefused): one of a genuine link, or of a post
	// to a request the caller reached; req is the request, actor who
	// tried, when known.
	trail *Session
	req   surface.PendingConfirmation
	actor string
}

// on has the refusal recorded in the audit trail of s, about its request
// v.
func (ref *approveRefusal) on(s *Session, v surface.PendingConfirmation) *approveRefusal {
	ref.trail, ref.req = s, v
	return ref
}

// AuditApproveRefused is the type of the audit record the Host writes to
// a session's audit trail (its registry's sink: surface.Options.Audit,
// and the replicas' shared audit) when the approve page refuses a request
// about one of its confirmation requests that it can tell is the
// session's: a genuine approve link (its signature verified) opened by
// someone it is not for, or after its request was decided or expired;
// and a post, through a link or with the session's cookie, that decides
// nothing (a bad form, a refused grant, a request decided meanwhile). The
// record names the request (capability, registration, consumer,
// confirmation), the refusal and why in Reason ("other-user: a link
// opened by another user"), and in Actor the signed-in user who tried,
// when Options.User names one. A malformed, forged or unknown link names
// no session it could be trusted to be about, and is only logged and
// counted, like every refusal (so that forged links cannot flood a
// session's trail).
const AuditApproveRefused surface.AuditType = "approve-refused"

// auditRefusal records ref in its session's audit trail. The sink is
// called outside every lock; its failure or panic is logged.
func (h *Host) auditRefusal(r *http.Request, ref *approveRefusal) {
	s := ref.trail
	if s.audit == nil {
		return
	}
	defer func() {
		if rec := recover(); rec != nil {
			h.log.Error("webhost: the audit sink panicked on an approve page refusal", "session", s.id, "panic", rec)
		}
	}()
	e := surface.AuditEvent{At: s.now(), Type: AuditApproveRefused, CapabilityID: ref.req.CapabilityID, RegistrationID: ref.req.RegistrationID,
		ConfirmationID: ref.req.ConfirmationID, ConsumerID: ref.req.ConsumerKey, Actor: ref.actor, Reason: string(ref.page.Refusal) + ": " + ref.why}
	if err := s.audit.Record(context.WithoutCancel(r.Context()), e); err != nil {
		h.log.Warn("webhost: an approve page refusal was not audited", "session", s.id, "error", err)
	}
}

func refusal(status int, reason ApproveRefusal, msg, why string) *approveRefusal {
	return &approveRefusal{page: ApprovePage{Status: status, Refusal: reason, Message: msg}, why: why}
}

// notFound is the one answer to every request that names no request the
// caller may know of; session is the public id of the session the
// request named, if any, for the log only.
func notFound(session, why string) *approveRefusal {
	r := refusal(http.StatusNotFound, RefuseNotFound,
		"There is no such approval request. It may have been made in another session, or the link is mistyped.", why)
	r.session = session
	return r
}

// target checks an approve-page request's credentials — its approve
// link, else the session's cookie, never an MCP bearer token — and finds
// the request it names, which must be pending.
func (h *Host) target(r *http.Request) (*approveTarget, *approveRefusal) {
	q := r.URL.Query()
	if link := q.Get(linkParam); link != "" {
		return h.linkTarget(r, link, q.Get(viaParam) == "url")
	}
	return h.cookieTarget(r)
}

// parseLink splits an approve link's value into its session id, kind
// and signature.
func parseLink(link string) (sid string, kind linkKind, mac []byte, ok bool) {
	rest, sig, ok1 := cutLast(link, '.')
	sid, k, ok2 := cutLast(rest, '.')
	if !ok1 || !ok2 || len(k) != 1 || linkKind(k[0]) != linkForUser && linkKind(k[0]) != linkNotified {
		return "", 0, nil, false
	}
	mac, err := base64.RawURLEncoding.Strict().DecodeString(sig) // strict: one encoding per signature
	if err != nil || len(mac) != sha256.Size {
		return "", 0, nil, false
	}
	return sid, linkKind(k[0]), mac, true
}

// cutLast cuts s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// linkTarget checks an approve link: its signature, then who opens it.
func (h *Host) linkTarget(r *http.Request, link string, viaURL bool) (*approveTarget, *approveRefusal) {
	id := r.PathValue("id")
	sid, kind, mac, ok := parseLink(link)
	if !ok {
		return nil, notFound("", "malformed link")
	}
	s := h.Session(sid)
	if s == nil {
		return nil, notFound("", "the link names no session of this replica")
	}
	v, pending, decided := s.request(id)
	if v.ConfirmationID == "" {
		return nil, notFound(s.id, "the link's request is not the session's")
	}
	if !hmac.Equal(mac, h.linkMAC(s, v, kind)) {
		return nil, notFound(s.id, "forged link")
	}
	// A genuine link from here on: who opens it?
	if ref := h.linkOpener(r, s, kind); ref != nil {
		return nil, ref.on(s, v)
	}
	channel := surface.ChannelWebhook
	if kind == linkForUser {
		channel = surface.ChannelLink
		if viaURL {
			channel = surface.ChannelURL
		}
	}
	if ref := h.ended(s, v, pending, decided); ref != nil {
		return nil, ref.on(s, v)
	}
	q := url.Values{linkParam: {link}}
	if viaURL {
		q.Set(viaParam, "url")
	}
	return &approveTarget{s: s, channel: channel, view: v, action: h.ApprovePath(id) + "?" + q.Encode()}, nil
}

// linkOpener refuses a genuine link of kind of s opened by someone it is
// not for: with Options.User, anyone but the session's user signed in;
// without, for a link of the user's, a browser that is not one of the
// session's.
func (h *Host) linkOpener(r *http.Request, s *Session, kind linkKind) *approveRefusal {
	otherUser := func(msg, why string) *approveRefusal {
		return &approveRefusal{page: ApprovePage{Status: http.StatusForbidden, Refusal: RefuseOtherUser, Message: msg}, why: why, session: s.id}
	}
	signIn := func(msg, why string) *approveRefusal {
		return &approveRefusal{page: ApprovePage{Status: http.StatusUnauthorized, Refusal: RefuseSignIn, Message: msg}, why: why, session: s.id}
	}
	switch {
	case h.opts.User != nil:
		u, err := h.opts.User(r)
		switch {
		case err != nil:
			h.stats.add(&h.stats.unauthenticated)
			return signIn("Sign in to the application, then open the link again.", "not signed in")
		case u != s.user:
			ref := otherUser("This approval request is another user's. Sign in as the user whose agent asked, then open the link again.",
				"a link opened by another user")
			ref.actor = u
			return ref
		}
	case kind == linkForUser:
		c := h.cookie(r)
		if c == "" {
			return signIn("Open this link in the browser where you use the application: the request is for that session.",
				"a link of the user's opened outside the session's browsers")
		}
		if cs, _ := h.lookup(credCookie, c, false); cs != s {
			return otherUser("This approval request is another session's. Open the link in the browser where you use the application.",
				"a link opened in another session's browser")
		}
	}
	return nil
}

// cookieTarget checks the session's cookie, as the Host's other routes
// do.
func (h *Host) cookieTarget(r *http.Request) (*approveTarget, *approveRefusal) {
	id := r.PathValue("id")
	user := ""
	if h.opts.User != nil {
		u, err := h.opts.User(r)
		if err != nil {
			h.stats.add(&h.stats.unauthenticated)
			return nil, refusal(http.StatusUnauthorized, RefuseSignIn, "Sign in to the application, then open this page again.", "not signed in")
		}
		user = u
	}
	cookie := h.cookie(r)
	if cookie == "" {
		return nil, refusal(http.StatusUnauthorized, RefuseSignIn,
			"Open this page from the application, or from the approve link you were given.", "neither a link nor the session's cookie")
	}
	s, err := h.lookup(credCookie, cookie, true)
	switch {
	case err != nil:
		return nil, refusal(http.StatusServiceUnavailable, RefuseUnavailable, "The server is serving as many pages as it can; try again later.", "no room for the session")
	case s == nil:
		h.stats.add(&h.stats.ended)
		return nil, notFound("", "the cookie names no live session")
	case s.user != user:
		h.stats.add(&h.stats.otherUser)
		return nil, &approveRefusal{page: ApprovePage{Status: http.StatusForbidden, Refusal: RefuseOtherUser,
			Message: "This session belongs to another user."}, why: "another user's session", session: s.id}
	}
	v, pending, decided := s.request(id)
	if v.ConfirmationID == "" {
		return nil, notFound(s.id, "no such request in the session")
	}
	if ref := h.ended(s, v, pending, decided); ref != nil {
		return nil, ref
	}
	return &approveTarget{s: s, channel: surface.ChannelPage, view: v, action: h.ApprovePath(id)}, nil
}

// ended refuses a request that is no longer pending (decided or expired),
// or whose time is up, for a caller who may know of it.
func (h *Host) ended(s *Session, v surface.PendingConfirmation, pending bool, decided *Decision) *approveRefusal {
	switch {
	case decided != nil && decided.Outcome == surface.OutcomeExpired, pending && !s.now().Before(v.ExpiresAt):
		return &approveRefusal{page: ApprovePage{Status: http.StatusGone, Session: s, Request: v, Decision: decided, Refusal: RefuseExpired,
			Message: "This request expired before anyone decided: nothing ran. The agent may ask again."}, why: "expired", session: s.id}
	case decided != nil:
		verb := "denied"
		if decided.Outcome == surface.OutcomeApproved {
			verb = "approved"
		}
		return &approveRefusal{page: ApprovePage{Status: http.StatusGone, Session: s, Request: v, Decision: decided, Refusal: RefuseDecided,
			Message: "This request was " + verb + " already" + by(decided.Actor) + ": a request is decided once."}, why: "decided already", session: s.id}
	case !pending:
		return notFound(s.id, "not pending")
	}
	return nil
}

// request returns the request id of the session: pending, or decided
// (or expired) among the decisions it keeps, with that decision. The
// view is zero when the session has no such request.
func (s *Session) request(id string) (v surface.PendingConfirmation, pending bool, decided *Decision) {
	if v, ok := s.pendingView(id); ok {
		return v, true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.decisions {
		if d := s.decisions[i]; d.ConfirmationID == id && d.view.ConfirmationID == id {
			if c, ok := s.calls[id]; ok {
				d.Call = &c
			}
			return d.view, false, &d
		}
	}
	return surface.PendingConfirmation{}, false, nil
}

// serveApprove shows the approve page of a request. It never decides.
func (h *Host) serveApprove(w http.ResponseWriter, r *http.Request) {
	t, ref := h.target(r)
	if ref != nil {
		h.refuseApprove(w, r, ref)
		return
	}
	h.renderApprove(w, ApprovePage{Status: http.StatusOK, Session: t.s, Request: t.view, Ask: true, Action: t.action,
		Grant: grantOffer(t.s, t.view)})
}

// serveApproveDecide decides a request as the approve page's form says:
// approve, deny, or approve with the standing grant the page offered,
// for one of the durations it offered. Nothing else of the form is read:
// the grant's scope and constraints are the Host's own derivation.
func (h *Host) serveApproveDecide(w http.ResponseWriter, r *http.Request) {
	t, ref := h.target(r)
	if ref != nil {
		h.refuseApprove(w, r, ref)
		return
	}
	if err := r.ParseForm(); err != nil {
		h.refuseApprove(w, r, (&approveRefusal{page: ApprovePage{Status: http.StatusBadRequest, Refusal: RefuseBadForm,
			Message: "The form could not be read."}, why: "unreadable form", session: t.s.id}).on(t.s, t.view))
		return
	}
	res := surface.Resolution{Actor: h.actor(r, t.s, t.channel), Channel: t.channel, Approver: surface.ApproverUser}
	badForm := func(msg, why string) {
		h.refuseApprove(w, r, (&approveRefusal{page: ApprovePage{Status: http.StatusBadRequest, Session: t.s, Request: t.view,
			Refusal: RefuseBadForm, Message: msg + " Nothing was decided: open the page again."}, why: why, session: t.s.id}).on(t.s, t.view))
	}
	switch r.PostForm.Get("decision") {
	case "approve":
		res.Approved = true
	case "deny":
	case "grant":
		offer := grantOffer(t.s, t.view)
		if offer == nil {
			badForm("This request offers no standing grant.", "a grant where none is offered")
			return
		}
		spec, _ := grantChosen(offer, r.PostForm.Get("minutes"))
		if spec == nil {
			badForm("Pick one of the durations the page offers.", "a grant duration not offered")
			return
		}
		res.Approved, res.Grant = true, spec
	default:
		badForm(`The decision must be "approve", "deny" or "grant".`, "an unknown decision")
		return
	}
	d, g, err := t.s.decide(t.view.ConfirmationID, res)
	var ge *surface.GrantError
	switch {
	case errors.As(err, &ge):
		h.refuseApprove(w, r, (&approveRefusal{page: ApprovePage{Status: http.StatusConflict, Session: t.s, Request: t.view, Refusal: RefuseGrant,
			Message: "The standing grant was refused (" + ge.Message + "). Nothing was approved: the request still waits; open the page again."},
			why: "grant refused: " + string(ge.Code), session: t.s.id}).on(t.s, t.view))
		return
	case err != nil: // decided or expired meanwhile
		v, pending, decided := t.s.request(t.view.ConfirmationID)
		ref := h.ended(t.s, v, pending, decided)
		if ref == nil {
			ref = notFound(t.s.id, "not pending")
		}
		h.refuseApprove(w, r, ref.on(t.s, t.view))
		return
	}
	page := ApprovePage{Status: http.StatusOK, Session: t.s, Request: t.view, Decision: &d}
	if g.GrantID != "" {
		page.Granted = &g
	}
	h.renderApprove(w, page)
}

// approveGuard refuses cross-origin posts to the approve page, as
// Host.Action does for the application's routes.
func (h *Host) approveGuard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.stats.add(&h.stats.crossOrigin)
		h.log.Warn("webhost: approve page refused", "reason", RefuseCrossOrigin, "why", "a cross-origin post",
			"confirmation", clipForLog(r.PathValue("id")), "origin", clipForLog(r.Header.Get("Origin")), "remote", r.RemoteAddr)
		h.renderApprove(w, ApprovePage{Status: http.StatusForbidden, Refusal: RefuseCrossOrigin,
			Message: "This decision was sent from another site, and is refused. Decide on the approve page itself."})
	}))
	return cop.Handler(next)
}

// refuseApprove answers a refused approve-page request, logs it at warn
// and counts it.
func (h *Host) refuseApprove(w http.ResponseWriter, r *http.Request, ref *approveRefusal) {
	if ref.page.Refusal == RefuseOtherUser {
		h.stats.add(&h.stats.otherUser)
	} else {
		h.stats.add(&h.stats.approve)
	}
	h.log.Warn("webhost: approve page refused", "reason", ref.page.Refusal, "why", ref.why, "method", r.Method,
		"confirmation", clipForLog(r.PathValue("id")), "session", ref.session, "remote", r.RemoteAddr)
	if ref.trail != nil {
		h.auditRefusal(r, ref)
	}
	h.renderApprove(w, ref.page)
}

// clipForLog shortens what a request sent, for a log line.
func clipForLog(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// renderApprove renders the approve page (Options.RenderApprove, or the
// default page) and answers with it.
func (h *Host) renderApprove(w http.ResponseWriter, p ApprovePage) {
	p.Stylesheet = h.opts.Prefix + "approve.css"
	var b bytes.Buffer
	var err error
	if h.opts.RenderApprove != nil {
		err = h.opts.RenderApprove(&b, p)
	} else {
		err = templates.ExecuteTemplate(&b, "approve", p)
	}
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		h.log.Error("webhost: the approve page did not render", "error", err)
		http.Error(w, "The approve page could not be shown.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(cmp.Or(p.Status, http.StatusOK))
	_, _ = w.Write(b.Bytes())
}

func (h *Host) serveApproveCSS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", scriptCacheControl)
	http.ServeContent(w, r, "approve.css", time.Time{}, bytes.NewReader(approveCSS))
}

// GrantOffer returns the standing grant the Host offers with an approval
// of the confirmation request p of this session — on the approve page
// and in the approvals card ([Approvals].Offers), and what a "grant"
// decision posted to either makes — or nil when p is not pending here,
// its capability allows no standing grant, or its input does not lend
// itself to constraints. It is derived from the request as it is
// pending (p names it by its ConfirmationID: the other fields of p are
// not read), never from what a form or an agent sent: an application
// that renders its own card shows exactly what a decision will grant.
func (s *Session) GrantOffer(p surface.PendingConfirmation) *GrantOffer {
	v, ok := s.pendingView(p.ConfirmationID)
	if !ok {
		return nil
	}
	return grantOffer(s, v)
}

// grantOffer returns the standing grant the approve page offers with
// the approval of v, or nil when the capability allows none (or the
// input does not lend itself to constraints).
func grantOffer(s *Session, v surface.PendingConfirmation) *GrantOffer {
	ceiling, err := s.reg.Grants().Ceiling(v.CapabilityID, "")
	if err != nil {
		return nil
	}
	most := int(ceiling.MaxTTL / time.Minute)
	var minutes []int
	for _, m := range []int{5, 15, 60} {
		if m <= most {
			minutes = append(minutes, m)
		}
	}
	if most > 0 && most < 60 && !slices.Contains(minutes, most) {
		minutes = append(minutes, most)
	}
	if len(minutes) == 0 {
		return nil
	}
	cs, terms, ok := deriveConstraints(v.Input)
	if !ok {
		return nil
	}
	return &GrantOffer{Minutes: minutes, MaxUses: ceiling.MaxUses, Consumer: v.ConsumerKey, Constraints: cs, Terms: terms}
}

// deriveConstraints binds a grant to an approved input and less: the
// input's members and no other (OnlyKeys), each holding only values the
// approved one held (ValueIn; for a list, each element among the
// approved elements). It refuses an input that is not an object, a
// member that a property path cannot name, and an empty list (no value
// bounds a later one, and an application may read "none" as "all").
// It is the derivation of surface.GrantSpec.FromInput, made here so that
// the page shows exactly the constraints the grant gets.
func deriveConstraints(input surface.JSONText) ([]surface.Constraint, []string, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(input), &m); err != nil || m == nil {
		return nil, nil, false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k == "" || strings.Contains(k, ".") {
			return nil, nil, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	cs := []surface.Constraint{surface.OnlyKeys("", keys...)}
	terms := []string{"no input other than " + strings.Join(keys, ", ")}
	if len(keys) == 0 {
		terms[0] = "no input at all"
	}
	for _, k := range keys {
		var val any
		if err := json.Unmarshal(m[k], &val); err != nil {
			return nil, nil, false
		}
		if arr, ok := val.([]any); ok {
			if len(arr) == 0 {
				return nil, nil, false
			}
			cs = append(cs, surface.ValueIn(k, arr...))
			terms = append(terms, k+": a non-empty list of "+shown(arr)+" only")
			continue
		}
		cs = append(cs, surface.ValueIn(k, val))
		terms = append(terms, k+" = "+shown([]any{val}))
	}
	return cs, terms, true
}

// shown writes JSON values for a person to read, as they are (no HTML
// escaping: the page's template escapes).
func shown(xs []any) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(x)
		out[i] = strings.TrimSuffix(b.String(), "\n")
	}
	return strings.Join(out, ", ")
}
