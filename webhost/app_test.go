package webhost_test

// The minimal application the tests run on the package: a notes board,
// one per session, with an observation (read), two local actions (add;
// clear, which needs the user's approval) and a navigation (open, which
// mounts a detail panel under the page's mount context). Its page has
// two live fragments and the approvals card.

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

var bg = context.Background()

// board is the notes board of one session.
type board struct {
	s *webhost.Session

	mu       sync.Mutex
	items    []string
	mounts   int
	mountCtx context.Context
	handle   *surface.Handle // the board's registration, while mounted
	detail   *surface.Handle
	notified []string
	pad      int  // bytes of padding in the count fragment (slow-client test)
	blocked  bool // clear's precondition fails
	// archivable mounts the archive action too (approve page tests): it
	// needs approval and allows standing grants.
	archivable bool
	archived   [][]string
}

// archiveInput is the input of the archive action.
type archiveInput struct {
	IDs   []string `json:"ids" jsonschema:"The notes to archive"`
	Force bool     `json:"force,omitempty" jsonschema:"Archive even pinned notes"`
}

// archiveGrants is the archive action's grant ceiling.
var archiveGrants = surface.GrantRule{Allow: true, MaxTTL: 30 * time.Minute, MaxUses: 3}

type addInput struct {
	Text string `json:"text" jsonschema:"The note"`
}

type openInput struct {
	Index int `json:"index" jsonschema:"The note's position, from 0"`
}

func newBoard(s *webhost.Session) (webhost.Views, error) { return &board{s: s}, nil }

func (b *board) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.items)
}

func (b *board) add(text string) {
	b.mu.Lock()
	b.items = append(b.items, text)
	b.mu.Unlock()
	b.changed()
}

func (b *board) clear() {
	b.mu.Lock()
	b.items = nil
	b.mu.Unlock()
	b.changed()
}

// changed re-evaluates clear's availability for agents and re-renders
// the page's fragments.
func (b *board) changed() {
	b.mu.Lock()
	h := b.handle
	b.mu.Unlock()
	if h != nil {
		h.Refresh()
	}
	b.s.Changed("notes", "count", "log")
}

func (b *board) Mount(ctx context.Context, s *webhost.Session) error {
	b.mu.Lock()
	b.mounts++
	b.mountCtx = ctx
	b.mu.Unlock()
	h, err := s.Registry().RegisterContext(ctx, surface.Component{
		Type: "notes.board", InstanceID: "main", Description: "The user's notes",
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[[]string]{
				Description: "Read the notes",
				Read:        func(context.Context, *surface.Call) ([]string, error) { return b.list(), nil },
			}),
		},
		Actions: map[string]surface.Capability{
			"add": surface.Action(surface.ActionDef[addInput, surface.None]{
				Description: "Add a note", Effect: surface.EffectLocalState,
				Precondition: func(_ context.Context, _ *surface.Call, in addInput) error {
					if in.Text == "" {
						return surface.Precondition("A note needs a text.", nil)
					}
					return nil
				},
				Execute: func(_ context.Context, _ *surface.Call, in addInput) (surface.None, error) {
					b.add(in.Text)
					return surface.None{}, nil
				},
			}),
			"clear": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Delete every note", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				When:              func() bool { return len(b.list()) > 0 },
				UnavailableReason: "There is nothing to clear.",
				Precondition: func(context.Context, *surface.Call, surface.None) error {
					b.mu.Lock()
					defer b.mu.Unlock()
					if b.blocked {
						return surface.Precondition("The notes are locked.", nil)
					}
					return nil
				},
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					b.clear()
					return surface.None{}, nil
				},
			}),
			"open": surface.Action(surface.ActionDef[openInput, surface.None]{
				Description: "Open a note's detail panel", Effect: surface.EffectNavigation, Idempotent: true,
				Execute: func(_ context.Context, _ *surface.Call, in openInput) (surface.None, error) {
					return surface.None{}, b.open(in.Index)
				},
			}),
		},
	})
	if err != nil {
		return err
	}
	if b.archivable {
		if _, err := s.Registry().RegisterContext(ctx, surface.Component{
			Type: "notes.archive", InstanceID: "main", Description: "The archive",
			Actions: map[string]surface.Capability{
				"archive": surface.Action(surface.ActionDef[archiveInput, surface.None]{
					Description: "Archive notes", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
					Grants: archiveGrants,
					Execute: func(_ context.Context, _ *surface.Call, in archiveInput) (surface.None, error) {
						b.mu.Lock()
						b.archived = append(b.archived, in.IDs)
						b.mu.Unlock()
						return surface.None{}, nil
					},
				}),
			},
		}); err != nil {
			return err
		}
	}
	h.Refresh() // a new registration starts as all available: push the real state
	b.mu.Lock()
	b.handle = h
	b.mu.Unlock()
	return nil
}

// open navigates: the detail panel of note i mounts under the page's
// mount context, replacing the one open.
func (b *board) open(i int) error {
	items := b.list()
	if i < 0 || i >= len(items) {
		return surface.Precondition("There is no such note.", nil)
	}
	b.mu.Lock()
	ctx, old := b.mountCtx, b.detail
	b.mu.Unlock()
	if old != nil {
		old.Unregister()
	}
	text := items[i]
	h, err := b.s.Registry().RegisterContext(ctx, surface.Component{
		Type: "notes.detail", InstanceID: fmt.Sprint("n", i), Description: "One note",
		Observations: map[string]surface.Capability{
			"readNote": surface.Observation(surface.ObservationDef[string]{
				Description: "Read the note",
				Read:        func(context.Context, *surface.Call) (string, error) { return text, nil },
			}),
		},
	})
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.detail = h
	b.mu.Unlock()
	b.s.Changed("detail")
	return nil
}

func (b *board) Fragment(_ context.Context, w io.Writer, id string) error {
	switch id {
	case "notes":
		return pageTemplate.ExecuteTemplate(w, "notes", b.list())
	case "log":
		return pageTemplate.ExecuteTemplate(w, "log", b.list())
	case "count":
		b.mu.Lock()
		pad := b.pad
		b.mu.Unlock()
		return pageTemplate.ExecuteTemplate(w, "count", map[string]any{"N": len(b.list()), "Pad": strings.Repeat("x", pad)})
	case "detail":
		b.mu.Lock()
		open := b.detail != nil && b.detail.Status() == surface.HandleActive
		b.mu.Unlock()
		_, err := fmt.Fprintf(w, "open=%v", open)
		return err
	}
	return webhost.ErrNoFragment
}

func (b *board) Notified(_ context.Context, topic string) {
	b.mu.Lock()
	b.notified = append(b.notified, topic)
	b.mu.Unlock()
	b.s.Changed("count")
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Notes</title><link rel="icon" href="data:,">{{.Script}}</head>
<body>
<p>session <code id="sid">{{.Session}}</code></p>
<ul id="notes" data-fragment>{{template "notes" .Notes}}</ul>
<p id="count" data-fragment></p>
<p id="detail" data-fragment></p>
<div id="log" data-fragment>{{template "log" .Notes}}</div>
<div id="agentsurface-approvals" data-fragment></div>
<form method="post" action="/notes" data-post data-reset><input name="text" aria-label="Note"><button>Add</button></form>
</body></html>
{{define "notes"}}{{range .}}<li>{{.}}</li>{{end}}{{end}}
{{define "log"}}<ol data-stick="bottom">{{range .}}<li>{{.}}</li>{{end}}</ol>{{end}}
{{define "count"}}{{.N}} notes{{with .Pad}}<span hidden>{{.}}</span>{{end}}{{end}}`))

// app is the notes application served through a Host.
type app struct {
	h   *webhost.Host
	srv *httptest.Server
}

// mux is the application's own routes: its page and one form.
func mux(h *webhost.Host) *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("GET /{$}", h.Page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := webhost.SessionFrom(r.Context())
		b := s.Views().(*board)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = pageTemplate.Execute(w, map[string]any{"Script": h.Script(), "Session": s.ID(), "Notes": b.list()})
	})))
	m.Handle("POST /notes", h.Action(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := webhost.SessionFrom(r.Context()).Views().(*board)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		b.add(r.PostForm.Get("text"))
		h.Posted(w, r)
	})))
	return m
}

// newApp serves the notes application on an httptest server. The Host
// closes before the server, ending the event streams.
func newApp(t testing.TB, opts webhost.Options) *app {
	t.Helper()
	if opts.NewViews == nil {
		opts.NewViews = newBoard
	}
	h, err := webhost.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(mux(h)))
	t.Cleanup(func() {
		_ = h.Close()
		srv.Close()
	})
	return &app{h: h, srv: srv}
}

// session makes a session driven without a browser, kept shown.
func (a *app) session(t testing.TB) *webhost.Session {
	t.Helper()
	s, err := a.h.NewSession(webhost.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func boardOf(s *webhost.Session) *board { return s.Views().(*board) }
