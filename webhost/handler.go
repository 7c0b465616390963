package webhost

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed static/page.js
var staticFS embed.FS

// pageScript is the page script, served at Options.Prefix + "page.js".
var pageScript = func() []byte {
	b, err := fs.ReadFile(staticFS, "static/page.js")
	if err != nil {
		panic(err)
	}
	return b
}()

// scriptCacheControl lets browsers keep the page script, checking it
// again on every use.
const scriptCacheControl = "no-cache"

// Handler returns the Host's handler: every request first passes the
// guard (the Host check, answered 421 before anything else is done; the
// body size and read time limits), then, with Options.Replicas, goes to
// the replica that owns its session; there it gets the security headers
// and is served by the Host's own routes (Options.Prefix, the MCP path,
// the health and readiness probes) or by app.
//
// Serve app's routes beside the Host through it: a page route wrapped in
// [Host.Page], a route that changes the session's state in
// [Host.Action]. Routes of app that are wrapped in neither (static
// files, a login page) are served as they are, behind the same guard.
func (h *Host) Handler(app http.Handler) http.Handler {
	if app == nil {
		app = http.NotFoundHandler()
	}
	mux := http.NewServeMux()
	mux.Handle(h.opts.Prefix, h.routes)
	if h.mcp != nil {
		mux.Handle(h.opts.MCP.Path, h.mcpRoute())
	}
	if o := h.opts.MCP.OAuth; o != nil && o.Metadata != nil && h.mcp != nil {
		mux.Handle("GET /.well-known/oauth-protected-resource", h.metadataHandler())
	}
	mux.HandleFunc(h.opts.HealthPath, h.serveHealth)
	mux.HandleFunc(h.opts.ReadyPath, h.serveReady)
	mux.Handle("/", app)
	var next http.Handler = h.secured(mux)
	if h.opts.Replicas != nil {
		// The owner checks the Host again and sets the answer's headers,
		// which the forwarding relays.
		next = h.opts.Replicas.Forward(next, h.sessionToken, h.longLived, h.forwardFailed)
	}
	return h.admit(next)
}

// newRoutes returns the Host's routes under Options.Prefix.
func (h *Host) newRoutes() *http.ServeMux {
	p := h.opts.Prefix
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+p+"page.js", h.serveScript)
	mux.HandleFunc("GET "+p+"ping", h.servePing)
	mux.HandleFunc("GET "+p+"events", h.serveEvents)
	mux.HandleFunc("GET "+p+"join/{code}", h.serveJoin)
	mux.Handle("POST "+p+"decide", h.Action(http.HandlerFunc(h.serveDecide)))
	mux.HandleFunc("GET "+p+"approve.css", h.serveApproveCSS)
	mux.HandleFunc("GET "+p+"approve/{id}", h.serveApprove)
	mux.Handle("POST "+p+"approve/{id}", h.approveGuard(http.HandlerFunc(h.serveApproveDecide)))
	if !h.opts.WebMCP.Disabled {
		mux.Handle("GET "+p+"webmcp/tools", h.sessionRoute(http.HandlerFunc(h.serveWebMCPTools)))
		mux.Handle("POST "+p+"webmcp/call", h.Action(http.HandlerFunc(h.serveWebMCPCall)))
	}
	return mux
}

// ScriptPath is the path of the page script (Options.Prefix + "page.js").
// A page includes it once, deferred (see [Host.Script]).
func (h *Host) ScriptPath() string { return h.opts.Prefix + "page.js" }

// Script returns the tag that includes the page script, for a page's
// <head>: the script keeps the page's live fragments (elements with an id
// and the data-fragment attribute) up to date, posts forms marked
// data-post in the background, shows a banner and reconnects when the
// server is unreachable or the session ended, and offers the session's
// tools to the browser's agent where the browser has WebMCP.
func (h *Host) Script() template.HTML {
	return template.HTML(`<script src="` + template.HTMLEscapeString(h.ScriptPath()) + `" defer></script>`) // escaped
}

func (h *Host) serveScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", scriptCacheControl)
	http.ServeContent(w, r, "page.js", time.Time{}, bytes.NewReader(pageScript))
}

// servePing answers the page script's check that the server is back
// before it reloads the page (so that the browser never shows its own
// error page).
func (h *Host) servePing(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// Page returns next as a page route: the request's session is found by
// its cookie, or made for a new visitor (in the unused pool until the
// page's script uses it, see [Options.MaxUnusedSessions]) and its cookie
// set; the views mount (see [Views]) and next serves the page with the
// session in the request's context ([SessionFrom]). The answer is marked
// Cache-Control: no-store (next may change it). A page includes the page
// script ([Host.Script]); its live fragments are elements with an id and
// the data-fragment attribute.
//
// When no session can be made (MaxSessions with open pages, the replicas'
// directory unreachable) the visitor gets a page that loads itself again
// (503, Retry-After).
func (h *Host) Page(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := h.requestUser(w, r)
		if !ok {
			return
		}
		s, _ := h.lookup(credCookie, h.cookie(r), false) // serving the page does not use a session: its script does
		if s != nil && s.user != user {
			s = nil // another account in this browser: a session of its own
		}
		if s == nil {
			var err error
			s, err = h.create(r.Context(), user, false, false, nil)
			if err != nil {
				if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrTooManySessions) && !errors.Is(err, ErrClosed) {
					h.log.Error("webhost: cannot make a session", "error", err)
					http.Error(w, "The session could not be made.", http.StatusInternalServerError)
					return
				}
				h.log.Warn("webhost: cannot make a session", "error", err)
				retryPage(w, http.StatusServiceUnavailable, 2)
				return
			}
			h.setCookie(w, r, cookieOf(s.join))
		}
		s.pageServed()
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, withSession(r, s))
	})
}

// Action returns next as a route that acts on the request's session: it
// needs the session of the request's cookie, live and of the request's
// user (else 401, or 403 for another user's), refuses cross-origin
// requests that change state (http.CrossOriginProtection: 403), and
// serves next with the session in the request's context ([SessionFrom]).
// next answers a form post of the page script with 2xx (see
// [Host.Posted]); the page sees the result through its live fragments.
func (h *Host) Action(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.stats.add(&h.stats.crossOrigin)
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	return cop.Handler(h.sessionRoute(next))
}

// sessionRoute serves next with the session of the request's cookie, or
// answers 401.
func (h *Host) sessionRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := h.requestSession(w, r, http.StatusUnauthorized); s != nil {
			next.ServeHTTP(w, withSession(r, s))
		}
	})
}

// Posted answers a form post that next handled: 204 No Content to the
// page script's background posts (and htmx requests), whose page shows
// the result through its live fragments, and 303 See Other to
// Options.Home to a plain form post.
func (h *Host) Posted(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(scriptHeader) != "" || r.Header.Get("HX-Request") != "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, h.opts.Home, http.StatusSeeOther)
}

// scriptHeader marks the page script's requests.
const scriptHeader = "X-Agentsurface"

// requestUser returns the request's user (Options.User), or answers 401.
func (h *Host) requestUser(w http.ResponseWriter, r *http.Request) (string, bool) {
	if h.opts.User == nil {
		return "", true
	}
	u, err := h.opts.User(r)
	if err != nil {
		h.stats.add(&h.stats.unauthenticated)
		http.Error(w, "Sign in first.", http.StatusUnauthorized)
		return "", false
	}
	return u, true
}

// requestSession returns the session of the request's cookie, used, or
// answers: 401 (Options.User refused), ended (no live session), 403 (the
// session of another user), 503 (every session has an open page).
func (h *Host) requestSession(w http.ResponseWriter, r *http.Request, ended int) *Session {
	user, ok := h.requestUser(w, r)
	if !ok {
		return nil
	}
	s, err := h.lookup(credCookie, h.cookie(r), true)
	switch {
	case err != nil:
		full(w)
		return nil
	case s == nil:
		h.stats.add(&h.stats.ended)
		http.Error(w, "This session has ended. Reload the page to start a new one.", ended)
		return nil
	case s.user != user:
		h.stats.add(&h.stats.otherUser)
		http.Error(w, "This session belongs to another user.", http.StatusForbidden)
		return nil
	}
	return s
}

// serveJoin binds the browser to the session of a join code. A code that
// names no session gets 404, a page saying so with a link to
// Options.Home, and no session.
func (h *Host) serveJoin(w http.ResponseWriter, r *http.Request) {
	user, ok := h.requestUser(w, r)
	if !ok {
		return
	}
	s, err := h.lookup(credJoin, r.PathValue("code"), true)
	if err != nil {
		full(w)
		return
	}
	if s == nil || s.user != user {
		h.stats.add(&h.stats.ended)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		_ = templates.ExecuteTemplate(w, "nojoin", h.opts.Home)
		return
	}
	h.setCookie(w, r, cookieOf(r.PathValue("code"))) // the session's cookie, also for a session of an earlier run
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, h.opts.Home, http.StatusSeeOther)
}

func (h *Host) setCookie(w http.ResponseWriter, r *http.Request, value string) {
	http.SetCookie(w, &http.Cookie{Name: h.opts.CookieName, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
}

// full answers a request that would use a session when none can be:
// every session has an open page.
func full(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, "The server is serving as many pages as it can; try again later.", http.StatusServiceUnavailable)
}

// retryPage answers a page request that cannot be served now with a page
// that loads itself again after seconds.
func retryPage(w http.ResponseWriter, status, seconds int) {
	w.Header().Set("Retry-After", strconv.Itoa(seconds))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = templates.ExecuteTemplate(w, "retry", seconds)
}

// serveHealth answers the liveness probe: 200 until Close.
func (h *Host) serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if h.isClosed() {
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// serveReady answers the readiness probe: 200 while the Host takes new
// requests, 503 once it drains or closes, or while its replicas are not
// ready.
func (h *Host) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h.mu.Lock()
	draining, closed := h.draining, h.closed
	h.mu.Unlock()
	switch {
	case closed:
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	case draining:
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	if h.opts.Replicas != nil {
		if err := h.opts.Replicas.Ready(); err != nil {
			http.Error(w, "replicas not ready", http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = w.Write([]byte("ok\n"))
}

// longLived reports whether r may legitimately wait long for its answer:
// an MCP request (a tool call may wait for elicitation or approval) and a
// WebMCP call (it waits for the user's approval in the page). Event
// streams answer their headers at once.
func (h *Host) longLived(r *http.Request) bool {
	p := r.URL.Path
	return h.mcp != nil && p == h.opts.MCP.Path || p == h.opts.Prefix+"webmcp/call"
}

// sessionToken names the session a request is for, as the Host's routes
// read it (the bearer token, or with OAuth the pairing header, on the MCP
// path; the join code of a join link; the session's public id, as its
// route, for an approve link; nothing for the page script, the ping and
// the probes; the cookie for everything else), to the replicas: by its
// hash, as they know the sessions' credentials.
func (h *Host) sessionToken(r *http.Request) string {
	if secret := h.requestSecret(r); secret != "" {
		return replicaToken(keyOf(secret))
	}
	return ""
}

// requestSecret returns the credential that names a request's session,
// or "" (see sessionToken).
func (h *Host) requestSecret(r *http.Request) string {
	p := r.URL.Path
	switch {
	case h.mcp != nil && p == h.opts.MCP.Path:
		if o := h.opts.MCP.OAuth; o != nil {
			return r.Header.Get(o.pairingHeader())
		}
		return bearer(r)
	case strings.HasPrefix(p, h.opts.Prefix+"join/"):
		code := strings.TrimPrefix(p, h.opts.Prefix+"join/")
		if strings.Contains(code, "/") {
			return ""
		}
		return code
	case strings.HasPrefix(p, h.opts.Prefix+"approve/"):
		if link := r.URL.Query().Get(linkParam); link != "" { // an approve link names its session by its public id
			if sid, _, _, ok := parseLink(link); ok {
				return routeSecret(sid)
			}
			return ""
		}
	case p == h.ScriptPath(), p == h.opts.Prefix+"ping", p == h.opts.Prefix+"approve.css", p == h.opts.HealthPath, p == h.opts.ReadyPath:
		return ""
	}
	return h.cookie(r)
}
