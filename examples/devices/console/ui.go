package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// cookieName names the session cookie.
const cookieName = "agentsurface_session"

// maxFormBytes caps form posts.
const maxFormBytes = 64 << 10

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"ago":   ago,
	"break": breakable,
}).ParseFS(templateFS, "templates/*.html"))

func (a *App) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.page)
	mux.HandleFunc("GET /join/{code}", a.joinSession)
	mux.HandleFunc("GET /events", a.events)
	// Forms post to /ui/…; cross-origin posts are refused (and the
	// SameSite=Lax cookie would not come with them anyway).
	mux.Handle("POST /ui/{action}", http.NewCrossOriginProtection().Handler(http.HandlerFunc(a.post)))
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("/mcp", a.serveMCP)
	mux.HandleFunc("GET /webmcp/tools", a.serveWebMCPTools)
	mux.Handle("POST /webmcp/call", http.NewCrossOriginProtection().Handler(http.HandlerFunc(a.serveWebMCPCall)))
	return mux
}

// page serves the console, starting a session for a new visitor.
func (a *App) page(w http.ResponseWriter, r *http.Request) {
	s, _ := a.sessionOf(r, false) // serving the page does not use a session: its script does
	if s == nil {
		var out []*Session
		var err error
		s, out, err = a.create(r.Context(), SessionOptions{}, false)
		for _, x := range out {
			x.Close()
		}
		if errors.Is(err, ErrUnavailable) {
			a.log.Warn("console: cannot claim a new session", "error", err)
			retryPage(w, http.StatusServiceUnavailable, 2)
			return
		}
		if err != nil {
			http.Error(w, "the console is full or closed; try again later", http.StatusServiceUnavailable)
			return
		}
		setCookie(w, s.cookie)
	}
	s.pageServed()
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, "page", s.pageData(r.Context(), baseURL(r), partAll)); err != nil {
		a.log.Error("console: render page", "error", err)
		http.Error(w, "render error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// joinSession binds the browser to the session of a join code. A code
// that names no session gets a page saying so, and no session.
func (a *App) joinSession(w http.ResponseWriter, r *http.Request) {
	s, err := a.lookup(credJoin, r.PathValue("code"), true)
	if err != nil {
		full(w)
		return
	}
	if s == nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		_ = templates.ExecuteTemplate(w, "no-session", nil)
		return
	}
	setCookie(w, s.cookie)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func setCookie(w http.ResponseWriter, value string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// events streams the page's fragments as server-sent events: all of them
// at once, then those that changed, as the session changes. A page that
// offers tools through WebMCP opens it with ?webmcp=1 and gets, after the
// fragments, a "tools" event with the tools to offer (webmcpList) at once
// and whenever they change. The stream keeps the page open (see Session);
// it ends when the client goes, a heartbeat cannot be written, or the
// session ends.
func (a *App) events(w http.ResponseWriter, r *http.Request) {
	s, err := a.sessionOf(r, true)
	if err != nil {
		full(w) // not 5xx-retried by EventSource: the page says why
		return
	}
	if s == nil {
		// 410: EventSource gives up instead of reconnecting.
		http.Error(w, "session ended", http.StatusGone)
		return
	}
	ps, ok := s.streamOpened()
	if !ok {
		http.Error(w, "session ended", http.StatusGone)
		return
	}
	defer s.streamClosed(ps)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(p []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(a.opts.WriteTimeout))
		if _, err := w.Write(p); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	base := baseURL(r)
	webmcp := r.URL.Query().Get("webmcp") == "1"
	sent, sentTools := map[string]string{}, ""
	send := func(parts part) bool {
		patch := map[string]string{}
		for id, html := range s.render(r.Context(), base, parts) {
			if sent[id] != html {
				patch[id], sent[id] = html, html
			}
		}
		if len(patch) > 0 {
			b, _ := json.Marshal(patch)
			if !write([]byte("event: patch\ndata: " + string(b) + "\n\n")) {
				return false
			}
		}
		if !webmcp || parts&(partSurface|partHeader) == 0 {
			return true
		}
		list, err := s.webmcp.list()
		if err != nil {
			return true // the session is ending: "ended" follows
		}
		b, _ := json.Marshal(list)
		if string(b) == sentTools {
			return true
		}
		sentTools = string(b)
		return write([]byte("event: tools\ndata: " + sentTools + "\n\n"))
	}
	ps.take() // the first render is of everything
	if !send(partAll) {
		return
	}
	// Changes are rendered at most once per renderEvery: a burst of them
	// waits for the timer and is rendered together.
	last := time.Now()
	var throttle <-chan time.Time
	beat := time.NewTicker(a.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			// The page reconnects: a fresh session where this one is gone.
			write([]byte("event: ended\ndata: This session has ended.\n\n"))
			return
		case <-ps.evicted:
			write([]byte("event: bye\ndata: This session is open in too many tabs: this one stopped following it. Reload to follow it here.\n\n"))
			return
		case <-ps.signal:
			if wait := renderEvery - time.Since(last); wait > 0 {
				if throttle == nil {
					throttle = time.After(wait)
				}
				continue
			}
			if !send(ps.take()) {
				return
			}
			last = time.Now()
		case <-throttle:
			throttle = nil
			if !send(ps.take()) {
				return
			}
			last = time.Now()
		case <-beat.C:
			if !write([]byte(": heartbeat\n\n")) {
				return
			}
		}
	}
}

// post handles the page's forms. Scripted pages (header X-Console) get
// 204 and see the result through their event stream; plain forms are
// redirected back to the page.
func (a *App) post(w http.ResponseWriter, r *http.Request) {
	s := a.activeSession(w, r)
	if s == nil {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	status, msg := s.handleForm(r.Context(), r.PathValue("action"), r.PostForm)
	if status >= 400 {
		http.Error(w, msg, status)
		return
	}
	if r.Header.Get("X-Console") != "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// handleForm applies one form post; it returns an HTTP status and, for
// errors, a message for the user.
func (s *Session) handleForm(ctx context.Context, action string, f map[string][]string) (int, string) {
	get := func(k string) string {
		if v := f[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	switch action {
	case "filter":
		st := get("status")
		if st != "" && !slices.Contains(statuses, st) {
			return http.StatusBadRequest, "unknown status"
		}
		if err := s.checkSite(ctx, get("site")); err != nil {
			return http.StatusBadRequest, "unknown site"
		}
		if err := s.setFilter(ctx, Filters{Site: get("site"), Status: st}); err != nil {
			return http.StatusInternalServerError, "the devices could not be read"
		}
	case "sort":
		col := get("column")
		if !slices.Contains(columns, col) {
			return http.StatusBadRequest, "unknown column"
		}
		s.mu.Lock()
		dir := "asc"
		if s.view.sort.Column == col && s.view.sort.Direction == "asc" {
			dir = "desc"
		}
		s.mu.Unlock()
		s.sortBy(Sorting{Column: col, Direction: dir})
	case "toggle":
		s.toggleRow(get("id"))
	case "clear":
		s.clearSelection()
	case "open":
		if err := s.openDevice(ctx, get("id")); err != nil {
			return http.StatusNotFound, "no such device"
		}
	case "close":
		s.closeDetail("")
	case "decide":
		approve := get("decision") == "approve"
		if _, ok := s.Decide(get("id"), approve, actorName(s.User(), "browser")); !ok {
			return http.StatusConflict, "This request is no longer pending."
		}
	case "user":
		i := slices.IndexFunc(users, func(u domain.User) bool { return u.ID == get("id") })
		if i < 0 {
			return http.StatusBadRequest, "unknown user"
		}
		s.SetUser(users[i])
	case "stop":
		s.StopAgent() // nothing to stop is fine: the run may just have ended
	case "ask":
		prompt := get("prompt")
		if prompt == "" {
			prompt = "Disable the offline devices in London."
		}
		if _, err := s.Ask(prompt); errors.Is(err, ErrBusy) {
			return http.StatusConflict, "The agent is still working."
		} else if err != nil {
			return http.StatusServiceUnavailable, "The agent console is closed."
		}
	default:
		return http.StatusNotFound, "unknown action"
	}
	return http.StatusOK, ""
}
