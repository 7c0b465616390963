// Command board is a team's kanban board in templ and htmx that agents
// operate beside its users, through package webhost. go run ./examples/board
// prints the link of a session of alice (an editor; victor may only read)
// and the line that connects an agent to it.
package main

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

//go:embed static
var static embed.FS

var users = []string{"alice", "victor"} // who may sign in; the store says who may change the board

// newApp returns the board's Host, configured by opts, and its handler.
func newApp(opts webhost.Options) (h *webhost.Host, handler http.Handler, err error) {
	st := &Store{changed: func() { h.Notify("cards") }, cards: []Card{{"c1", "Write the release notes", "todo"},
		{"c2", "Fix the login page", "todo"}, {"c3", "Plan the offsite", "doing"}, {"c4", "Review the budget", "done"}}}
	opts.NewViews = func(s *webhost.Session) (webhost.Views, error) { return &views{s: s, store: st}, nil }
	opts.Executor = executor(st)
	opts.User = signedIn
	if h, err = webhost.New(opts); err != nil {
		return nil, nil, err
	}
	return h, h.Handler(routes(h, st)), nil
}

// boardState is what a session's page shows, and what its agent reads.
type boardState struct {
	Cards    []Card   `json:"cards"`
	Selected []string `json:"selected"`
}

// views is one session's view of the shared board.
type views struct {
	s        *webhost.Session
	store    *Store
	mu       sync.Mutex
	selected []string
	board    *surface.Handle // the board's registration, once mounted
}

// Mount registers the board for as long as a page shows it.
func (v *views) Mount(ctx context.Context, s *webhost.Session) error {
	h, err := s.Registry().RegisterContext(ctx, surface.Component{
		Type: "kanban.board", Description: "The team's kanban board, as this user's page shows it",
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[boardState]{
				Description: "Read the board: its cards and the selection",
				Read:        func(context.Context, *surface.Call) (boardState, error) { return v.state(), nil },
			}),
		},
		Actions: map[string]surface.Capability{
			"select": surface.Action(surface.ActionDef[cardIDs, surface.None]{
				Description: "Select cards, replacing the selection", Effect: surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in cardIDs) (surface.None, error) {
					return surface.None{}, v.set(func() { v.selected = in.IDs })
				},
			}),
		},
		Procedures: []surface.Capability{
			surface.Procedure(surface.ProcedureDef[moveInput, surface.None]{
				ID: "domain:cards.move", Description: "Move a card to another column", Effect: surface.EffectServerMutation,
			}),
			surface.Procedure(surface.ProcedureDef[cardIDs, surface.None]{
				ID: "domain:cards.delete", Description: "Delete the selected cards, for good", Effect: surface.EffectDestructive,
				Bound: []string{"ids"}, // the live selection, locked: an agent cannot name other cards
				Bind:  func(context.Context) (map[string]any, error) { return map[string]any{"ids": v.state().Selected}, nil },
				When:  func() bool { return len(v.state().Selected) > 0 }, UnavailableReason: "No card is selected.",
			}),
		},
	})
	if err != nil {
		return err
	}
	return v.set(func() { v.board = h })
}

// set changes the view state, then shows the change to agents (whether
// delete is available) and to the pages.
func (v *views) set(change func()) error {
	v.mu.Lock()
	change()
	h := v.board
	v.mu.Unlock()
	if h != nil {
		h.Refresh()
	}
	v.s.Changed("board")
	return nil
}

// state is the board as the session shows it.
func (v *views) state() boardState {
	cards := v.store.Cards()
	v.mu.Lock()
	defer v.mu.Unlock()
	st := boardState{Cards: cards, Selected: []string{}}
	for _, c := range cards {
		if slices.Contains(v.selected, c.ID) {
			st.Selected = append(st.Selected, c.ID)
		}
	}
	return st
}

// Notified follows the store's changes (Host.Notify) to the pages.
func (v *views) Notified(context.Context, string) { _ = v.set(func() {}) }

// Fragment renders the page's live fragments.
func (v *views) Fragment(ctx context.Context, w io.Writer, id string) error {
	if id != "board" {
		return webhost.ErrNoFragment
	}
	return board(v.state()).Render(ctx, w)
}

// signedIn stands in for the application's own login (a demo has no
// passwords): a browser is alice until it signs in as someone else.
func signedIn(r *http.Request) (string, error) {
	if c, err := r.Cookie("board_user"); err == nil && slices.Contains(users, c.Value) {
		return c.Value, nil
	}
	return "alice", nil
}

// routes are the board's own: its page, its controls' posts, its login.
func routes(h *webhost.Host, st *Store) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.Handle("GET /{$}", h.Page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := webhost.SessionFrom(r.Context())
		_ = page(h.ScriptPath(), s, "http://"+r.Host+"/mcp", s.Views().(*views).state()).Render(r.Context(), w)
	})))
	post := func(path string, do func(v *views, form url.Values) error) {
		mux.Handle("POST "+path, h.Action(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err != nil {
				http.Error(w, "bad form", http.StatusBadRequest)
			} else if err := do(webhost.SessionFrom(r.Context()).Views().(*views), r.PostForm); err != nil {
				http.Error(w, err.Error(), http.StatusConflict)
			} else {
				h.Posted(w, r)
			}
		})))
	}
	post("/select", func(v *views, f url.Values) error { return v.set(func() { v.selected = f["ids"] }) })
	post("/move", func(v *views, f url.Values) error { return st.Move(v.s.User(), f.Get("id"), f.Get("column")) })
	post("/delete", func(v *views, _ url.Values) error { return st.Delete(v.s.User(), v.state().Selected) })
	mux.Handle("POST /login", http.NewCrossOriginProtection().Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.PostFormValue("user"); slices.Contains(users, u) {
			http.SetCookie(w, &http.Cookie{Name: "board_user", Value: u, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		}
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})))
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "the address to listen on")
	flag.Parse()
	h, handler, err := newApp(webhost.Options{})
	check(err)
	s, err := h.NewSession(webhost.SessionOptions{User: "alice"})
	check(err)
	ln, err := net.Listen("tcp", *addr)
	check(err)
	fmt.Printf("Board: http://%s%s\nMCP:   claude mcp add --transport http board http://%[1]s/mcp --header \"Authorization: Bearer %[3]s\"\n",
		ln.Addr(), s.JoinPath(), s.Token())
	log.Fatal((&http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
