package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/webhost"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// maxFormBytes caps form posts.
const maxFormBytes = 64 << 10

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"ago":   ago,
	"break": breakable,
}).ParseFS(templateFS, "templates/*.html"))

// routes are the console's own routes, served beside the Host's: the
// page (a page of the Host: it finds or makes the session), the forms
// (actions of the Host: they need the page's live session and refuse
// cross-origin posts) and the static files.
func (a *App) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", a.host.Page(http.HandlerFunc(a.page)))
	mux.Handle("POST /ui/{action}", a.host.Action(http.HandlerFunc(a.post)))
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	return mux
}

// page serves the console for the request's session.
func (a *App) page(w http.ResponseWriter, r *http.Request) {
	ws := webhost.SessionFrom(r.Context())
	s := viewsOf(ws)
	d := s.pageData(r.Context(), partAll)
	d.Script, d.Connect = a.host.Script(), connectCommands(a.baseURL(r), s.Token())
	var approvals bytes.Buffer
	if err := ws.RenderApprovals(&approvals); err == nil {
		d.Approvals = template.HTML(approvals.String()) // rendered by html/template
	}
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, "page", d); err != nil {
		http.Error(w, "render error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// baseURL is where users reach the console: Options.Host.PublicURL, else
// the scheme and Host of the request.
func (a *App) baseURL(r *http.Request) string {
	if u := strings.TrimSuffix(a.opts.Host.PublicURL, "/"); u != "" {
		return u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// post handles the page's forms. The page's script (header
// X-Agentsurface) gets 204 and sees the result through its live
// fragments; plain forms are redirected back to the page.
func (a *App) post(w http.ResponseWriter, r *http.Request) {
	s := viewsOf(webhost.SessionFrom(r.Context()))
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
	a.host.Posted(w, r)
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
	case "user":
		i := slices.IndexFunc(users, func(u domain.User) bool { return u.ID == get("id") })
		if i < 0 {
			return http.StatusBadRequest, "unknown user"
		}
		s.SetUser(users[i])
	case "revoke":
		if !s.revokeGrant(ctx, get("id")) {
			return http.StatusNotFound, "There is no such active grant in this session."
		}
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
