package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
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
	"ago": ago,
}).ParseFS(templateFS, "templates/*.html"))

// fragments are the parts of the page an event stream replaces, by the
// id of their container.
var fragments = []string{"header", "table", "detail", "approvals", "agent", "connect", "surface", "activity"}

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
	s := a.bySessionCookie(r)
	if s == nil {
		var err error
		if s, err = a.newSession(SessionOptions{}); err != nil {
			http.Error(w, "the console is full or closed; try again later", http.StatusServiceUnavailable)
			return
		}
		setCookie(w, s.cookie)
	}
	s.pageServed()
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, "page", s.pageData(r.Context(), baseURL(r))); err != nil {
		a.log.Error("console: render page", "error", err)
		http.Error(w, "render error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// joinSession binds the browser to the session of a join code.
func (a *App) joinSession(w http.ResponseWriter, r *http.Request) {
	if s := a.byJoinCode(r.PathValue("code")); s != nil {
		setCookie(w, s.cookie)
	}
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
	s := a.bySessionCookie(r)
	if s == nil {
		// 410: EventSource gives up instead of reconnecting.
		http.Error(w, "session ended", http.StatusGone)
		return
	}
	sub, ok := s.streamOpened()
	if !ok {
		http.Error(w, "session ended", http.StatusGone)
		return
	}
	defer s.streamClosed(sub)
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
	send := func() bool {
		patch := map[string]string{}
		for id, html := range s.fragments(r.Context(), base) {
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
		if !webmcp {
			return true
		}
		list, err := s.webmcp.list()
		if err != nil {
			return true // the session is ending: "bye" follows
		}
		b, _ := json.Marshal(list)
		if string(b) == sentTools {
			return true
		}
		sentTools = string(b)
		return write([]byte("event: tools\ndata: " + sentTools + "\n\n"))
	}
	if !send() {
		return
	}
	beat := time.NewTicker(a.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			write([]byte("event: bye\ndata: This session has ended. Reload the page to start a new one.\n\n"))
			return
		case <-sub:
			if !send() {
				return
			}
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

// fragments renders the page's fragments.
func (s *Session) fragments(ctx context.Context, base string) map[string]string {
	data := s.pageData(ctx, base)
	out := make(map[string]string, len(fragments))
	var buf bytes.Buffer
	for _, id := range fragments {
		buf.Reset()
		if err := templates.ExecuteTemplate(&buf, id, data); err != nil {
			s.app.log.Error("console: render", "fragment", id, "error", err)
			continue
		}
		out[id] = buf.String()
	}
	return out
}

// pageData is what the templates render.
type pageData struct {
	Session   string
	User      domain.User
	Users     []domain.User
	Shown     bool
	Table     tableData
	Detail    *DeviceDetail
	Approvals []approvalCard
	Decisions []Decision
	Activity  []activityRow
	Agent     agentData
	Connect   connectData
	Surface   []surfaceRow
	Version   string
}

type tableData struct {
	TableState
	Statuses []string
	Columns  []columnHead
	Error    string
}

type columnHead struct{ Key, Label, Arrow string }

type approvalCard struct {
	ID, Summary, Capability, Consumer, Reason, Input string
	Devices                                          []string
	ExpiresAt                                        time.Time
}

type activityRow struct {
	At                                         time.Time
	Type, Capability, Consumer, Outcome, Actor string
	Millis                                     string
	Class                                      string
}

type agentData struct {
	Name    string
	Busy    bool
	Entries []ChatEntry
}

type connectData struct {
	URL, Token, Claude, Inspector, CLI string
}

// surfaceRow is one capability on the Live surface card, as
// Registry.Explain explains it for the page's agent: its outcome, why,
// and the policies that judged it.
type surfaceRow struct {
	ID, Reason, Note string
	Outcome          surface.Visibility
	Policies         []string // the policies that hide or disable it: "name (layer): vote"
}

func (s *Session) pageData(ctx context.Context, base string) pageData {
	s.mu.Lock()
	d := pageData{Session: s.id, User: s.user, Users: users, Shown: s.shown, Decisions: slices.Clone(s.decisions)}
	open := s.view.detail
	s.mu.Unlock()
	slices.Reverse(d.Decisions)

	d.Table.Statuses = statuses
	if st, err := s.tableState(ctx); err != nil {
		d.Table.Error = "The devices could not be read."
	} else {
		d.Table.TableState = st
	}
	for _, c := range [][2]string{{"name", "Name"}, {"site", "Site"}, {"status", "Status"}, {"lastSeen", "Last seen"}} {
		h := columnHead{Key: c[0], Label: c[1]}
		if d.Table.Sort.Column == c[0] {
			h.Arrow = " ▲"
			if d.Table.Sort.Direction == "desc" {
				h.Arrow = " ▼"
			}
		}
		d.Table.Columns = append(d.Table.Columns, h)
	}
	if open != "" {
		if dd, err := s.deviceDetail(ctx, open); err == nil {
			d.Detail = &dd
		}
	}
	for _, p := range s.reg.Confirmations().Pending() {
		d.Approvals = append(d.Approvals, s.card(p))
	}
	for _, e := range s.activity.newestFirst() {
		if len(d.Activity) == 40 {
			break
		}
		if e.Type == surface.AuditInvocationStarted {
			continue // its settlement says it all
		}
		d.Activity = append(d.Activity, feedRow(e))
	}
	d.Agent = agentData{Name: s.app.opts.AgentName, Busy: s.console.busy(), Entries: s.Chat()}
	if n := len(d.Agent.Entries); n > 30 {
		d.Agent.Entries = d.Agent.Entries[n-30:]
	}
	url := base + "/mcp"
	d.Connect = connectData{
		URL: url, Token: s.token,
		Claude:    fmt.Sprintf(`claude mcp add --transport http devices %s --header "Authorization: Bearer %s"`, url, s.token),
		Inspector: fmt.Sprintf(`npx @modelcontextprotocol/inspector --cli %s --transport http --header "Authorization: Bearer %s" --method tools/list`, url, s.token),
		CLI:       fmt.Sprintf(`go run ./cmd/agentsurface inspect %s --token %s`, url, s.token),
	}
	// The card explains the surface rather than listing the snapshot, so
	// that a capability a policy hides shows up, struck out, with the
	// policy that hid it; the snapshot adds the procedures' live notes.
	snap := s.reg.Snapshot(surface.SnapshotOptions{Consumer: ConsoleConsumer})
	notes := map[string]string{}
	for _, p := range snap.Procedures {
		notes[p.RegistrationID+" "+p.ProcedureID] = p.ContextualNote
	}
	for _, c := range s.reg.Explain(surface.SnapshotOptions{Consumer: ConsoleConsumer}).Capabilities {
		row := surfaceRow{ID: c.CapabilityID, Outcome: c.Outcome, Reason: c.Reason, Note: notes[c.RegistrationID+" "+c.CapabilityID]}
		if c.Kind != surface.KindProcedure && c.InstanceID != "main" {
			row.ID += " @" + c.InstanceID
		}
		for _, p := range c.Policies {
			if p.Vote == "hide" || p.Vote == "disable" {
				row.Policies = append(row.Policies, p.Name+" ("+string(p.Layer)+"): "+p.Vote)
			}
		}
		d.Surface = append(d.Surface, row)
	}
	d.Version = snap.SurfaceVersion
	return d
}

// card is the approval card of a pending confirmation: the exact input,
// with the devices by name.
func (s *Session) card(p surface.PendingConfirmation) approvalCard {
	c := approvalCard{ID: p.ConfirmationID, Summary: p.Summary, Capability: p.CapabilityID, Consumer: p.ConsumerKey, ExpiresAt: p.ExpiresAt}
	var in struct {
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}
	if json.Unmarshal([]byte(p.Input), &in) == nil {
		for _, id := range in.IDs {
			c.Devices = append(c.Devices, s.nameOf(id)+" ("+id+")")
		}
		c.Reason = in.Reason
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(p.Input), "", "  ") == nil {
		c.Input = pretty.String()
	} else {
		c.Input = string(p.Input)
	}
	return c
}

func feedRow(e surface.AuditEvent) activityRow {
	r := activityRow{At: e.At, Type: string(e.Type), Capability: e.CapabilityID, Consumer: e.ConsumerID, Actor: e.Actor}
	if r.Capability == "" {
		r.Capability = e.RegistrationID
	}
	switch {
	case e.Code == surface.CodeConfirmationRequired:
		r.Outcome, r.Class = string(e.Code), "pending"
	case e.Code != "":
		r.Outcome, r.Class = string(e.Code), "failed"
	case e.Status != "":
		r.Outcome = string(e.Status)
	}
	switch e.Type {
	case surface.AuditConfirmationApproved:
		r.Outcome, r.Class = "approved", "good"
	case surface.AuditConfirmationDenied, surface.AuditConfirmationExpired:
		r.Outcome, r.Class = strings.TrimPrefix(string(e.Type), "confirmation-"), "failed"
	}
	if e.DurationMs != nil {
		r.Millis = strconv.FormatInt(*e.DurationMs, 10)
	}
	return r
}

// ago formats how long ago t was, coarsely.
func ago(t any) string {
	var at time.Time
	switch v := t.(type) {
	case time.Time:
		at = v
	case string:
		p, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return v
		}
		at = p
	}
	d := time.Since(at)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return at.UTC().Format("2006-01-02")
}
