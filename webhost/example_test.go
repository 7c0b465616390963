package webhost_test

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notes is one session's notes board (the package documentation's
// application).
type notes struct {
	s     *webhost.Session
	mu    sync.Mutex
	items []string
}

type note struct {
	Text string `json:"text" jsonschema:"The note"`
}

func (n *notes) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.items...)
}

func (n *notes) add(text string) {
	n.mu.Lock()
	n.items = append(n.items, text)
	n.mu.Unlock()
	n.s.Changed("notes") // the page's fragment follows
}

// Mount registers what the page shows, for as long as it shows it.
func (n *notes) Mount(ctx context.Context, s *webhost.Session) error {
	_, err := s.Registry().RegisterContext(ctx, surface.Component{
		Type: "notes.board", Description: "The user's notes",
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[[]string]{
				Description: "Read the notes",
				Read:        func(context.Context, *surface.Call) ([]string, error) { return n.list(), nil },
			}),
		},
		Actions: map[string]surface.Capability{
			"add": surface.Action(surface.ActionDef[note, surface.None]{
				Description: "Add a note", Effect: surface.EffectLocalState,
				Confirmation: surface.ConfirmRequired, // the user approves in the page
				Execute: func(_ context.Context, _ *surface.Call, in note) (surface.None, error) {
					n.add(in.Text)
					return surface.None{}, nil
				},
			}),
		},
	})
	return err
}

// Fragment renders the page's live fragment "notes".
func (n *notes) Fragment(_ context.Context, w io.Writer, id string) error {
	if id != "notes" {
		return webhost.ErrNoFragment
	}
	return page.ExecuteTemplate(w, "notes", n.list())
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><title>Notes</title>{{.Script}}</head><body>
<ul id="notes" data-fragment>{{template "notes" .Notes}}</ul>
<div id="agentsurface-approvals" data-fragment></div>
<p>Agent token: <code>{{.Token}}</code></p>
</body></html>
{{define "notes"}}{{range .}}<li>{{.}}</li>{{end}}{{end}}`))

// A notes application on a Host: its page route, and an agent that adds
// a note over MCP with the session's token, once the user approved.
func Example() {
	h, err := webhost.New(webhost.Options{
		NewViews: func(s *webhost.Session) (webhost.Views, error) { return &notes{s: s}, nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", h.Page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := webhost.SessionFrom(r.Context())
		_ = page.Execute(w, map[string]any{"Script": h.Script(), "Notes": s.Views().(*notes).list(), "Token": s.Token()})
	})))
	srv := httptest.NewServer(h.Handler(mux))
	defer srv.Close()

	// A session shown as if its page were open (a browser would GET /).
	s, err := h.NewSession(webhost.SessionOptions{KeepShown: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{
			Transport: bearerRT{s.Token(), http.DefaultTransport}}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	add := func() string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "view_notes__board__add", Arguments: map[string]any{"text": "buy milk"}})
		if err != nil {
			return err.Error()
		}
		env := res.StructuredContent.(map[string]any)
		if e, ok := env["error"].(map[string]any); ok {
			return fmt.Sprint(e["code"])
		}
		return fmt.Sprint(env["status"])
	}
	fmt.Println(add())
	p := s.Pending()[0] // the page's approvals card shows it
	s.Decide(p.ConfirmationID, true, "the user")
	fmt.Println(add())
	fmt.Println(s.Views().(*notes).list())
	d := s.Decisions()[0]
	fmt.Println(d.Outcome, "by", d.Actor, "→", d.Call.Status)
	// Output:
	// CONFIRMATION_REQUIRED
	// ok
	// [buy milk]
	// approved by the user → ok
}
