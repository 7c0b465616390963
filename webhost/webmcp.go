package webhost

// WebMCP: the page offers the session's tools to an agent that runs in
// the user's own browser, through the browser's model context
// (document.modelContext, a proposed web API; navigator.modelContext in
// earlier drafts). The page script does the browser side
// (static/page.js): it feature-detects the model context and registers
// one tool per tool listed here; a tool's execute posts to the call
// endpoint. This file is the server side: the list of the tools (GET
// Prefix+"webmcp/tools", and the "tools" events of an event stream opened
// with webmcp=1) and their calls (POST Prefix+"webmcp/call"), both
// through one surface.Toolset per session for Options.WebMCP.Consumer,
// so that policies, availability, staleness and confirmations apply as
// they do for MCP clients.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// webmcpCatalogs is how many offered catalogs a session keeps for calls:
// a page refers to the catalog of the last list it applied, and an agent
// may still hold a tool from an earlier one.
const webmcpCatalogs = 16

// webmcpTools are the WebMCP tools of one session: a toolset for
// WebMCPConsumer, made on first use, and the catalogs offered to its
// pages, by surface version. A call names the tool and the version of the
// list it came from and goes through that catalog, so it reaches the
// registration the agent was offered, or fails with the registry's
// staleness verdict (COMPONENT_UNMOUNTED, STALE_CAPABILITY), as an MCP
// client's call of a tool from an old tools/list does.
//
// Confirmations wait: a tool call that needs the user's approval returns
// when the user has approved or denied it in the page (or it expired),
// with the final result. Two-phase cannot work here: a WebMCP tool's
// arguments have no slot for the confirmation id, so a retry would ask
// again.
type webmcpTools struct {
	reg      *surface.Registry
	consumer surface.Consumer

	mu     sync.Mutex
	ts     *surface.Toolset
	shown  map[string]*surface.Catalog // by surface version
	order  []string                    // the versions in shown, oldest first
	closed bool
}

// webmcpList is what GET /webmcp/tools answers and a "tools" event
// carries: the tools to offer, exactly the available ones.
type webmcpList struct {
	// SurfaceVersion names the catalog; calls of these tools send it.
	SurfaceVersion string       `json:"surfaceVersion"`
	Tools          []webmcpTool `json:"tools"`
}

// webmcpTool is one tool in the shape a model context registers it (the
// page adds execute).
type webmcpTool struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	InputSchema surface.JSONText   `json:"inputSchema"`
	Annotations *webmcpAnnotations `json:"annotations,omitempty"`
	// RegistrationID tells the page a tool whose component was replaced
	// (same name, new registration) from an unchanged one, so that it
	// offers the new one as a new tool.
	RegistrationID string `json:"registrationId"`
}

type webmcpAnnotations struct {
	ReadOnlyHint bool `json:"readOnlyHint"`
}

// webmcpCall is the body of POST /webmcp/call.
type webmcpCall struct {
	Name string `json:"name"`
	// SurfaceVersion is the one of the list the tool came from.
	SurfaceVersion string          `json:"surfaceVersion"`
	Input          json.RawMessage `json:"input,omitempty"`
}

// toolset returns the session's WebMCP toolset, made on first use.
func (w *webmcpTools) toolset() (*surface.Toolset, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	if w.ts == nil {
		ts, err := surface.NewToolset(w.reg, surface.ToolsetOptions{Consumer: w.consumer, Confirmations: surface.ConfirmationModeWait})
		if err != nil {
			return nil, err
		}
		w.ts, w.shown = ts, map[string]*surface.Catalog{}
	}
	return w.ts, nil
}

// list builds the current catalog, keeps it for calls and returns its
// available tools.
func (w *webmcpTools) list() (webmcpList, error) {
	ts, err := w.toolset()
	if err != nil {
		return webmcpList{}, err
	}
	cat := ts.Catalog()
	v := cat.SurfaceVersion()
	w.mu.Lock()
	if _, ok := w.shown[v]; !ok {
		w.order = append(w.order, v)
		if len(w.order) > webmcpCatalogs {
			delete(w.shown, w.order[0])
			w.order = slices.Delete(w.order, 0, 1)
		}
	}
	w.shown[v] = cat // the latest build of a version: the same targets
	w.mu.Unlock()

	out := webmcpList{SurfaceVersion: v, Tools: []webmcpTool{}}
	for _, t := range cat.Tools() {
		if !t.State.Available {
			continue // WebMCP has no disabled tools: the unavailable ones are not offered
		}
		wt := webmcpTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, RegistrationID: t.RegistrationID}
		if t.Effect == surface.EffectRead || t.Effect == surface.EffectServerQuery {
			wt.Annotations = &webmcpAnnotations{ReadOnlyHint: true}
		}
		out.Tools = append(out.Tools, wt)
	}
	return out, nil
}

// call calls tool name of the catalog offered at version. A version that
// was never offered, or is too old to be kept, answers
// CAPABILITY_NOT_FOUND (retry after refresh): the tools it named are
// unknown, and the page has a newer list.
func (w *webmcpTools) call(ctx context.Context, name, version string, input json.RawMessage) surface.Result {
	if _, err := w.toolset(); err != nil {
		return w.notFound(name)
	}
	w.mu.Lock()
	cat := w.shown[version]
	w.mu.Unlock()
	if cat == nil {
		return w.notFound(name)
	}
	return cat.Call(ctx, name, input, surface.CallOptions{})
}

// notFound is the result of calling a tool of a catalog the session does
// not know.
func (w *webmcpTools) notFound(name string) surface.Result {
	return surface.Result{Status: surface.StatusError, InvocationID: newInvocationID(), CapabilityID: name,
		Error: surface.NewError(surface.CodeCapabilityNotFound, "", nil), SurfaceVersion: w.reg.Version()}
}

// close closes the toolset: calls waiting for a confirmation return the
// CONFIRMATION_REQUIRED they got. It is idempotent.
func (w *webmcpTools) close() {
	w.mu.Lock()
	w.closed = true
	ts := w.ts
	w.ts, w.shown, w.order = nil, nil, nil
	w.mu.Unlock()
	if ts != nil {
		_ = ts.Close()
	}
}

// serveWebMCPTools serves GET /webmcp/tools: the tools the page offers
// now, as the "tools" events of its stream carry them.
func (h *Host) serveWebMCPTools(w http.ResponseWriter, r *http.Request) {
	s := SessionFrom(r.Context())
	list, err := s.tools().list()
	if err != nil {
		http.Error(w, "This session has ended. Reload the page to start a new one.", http.StatusGone)
		return
	}
	writeJSON(w, list)
}

// serveWebMCPCall serves POST /webmcp/call: one call of an offered tool,
// answered with the registry's result envelope, unchanged, whatever its
// status. A call that needs the user's approval waits for it.
func (h *Host) serveWebMCPCall(w http.ResponseWriter, r *http.Request) {
	s := SessionFrom(r.Context())
	var c webmcpCall
	dec := json.NewDecoder(r.Body) // capped at MaxBodyBytes by the guard
	if err := dec.Decode(&c); err != nil || c.Name == "" || dec.Decode(new(json.RawMessage)) != io.EOF {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.stats.add(&h.stats.tooLarge)
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, `the body must be one JSON object {"name", "surfaceVersion", "input"}`, http.StatusBadRequest)
		return
	}
	res := s.tools().call(r.Context(), c.Name, c.SurfaceVersion, c.Input)
	s.touch() // a wait for the user's approval may have been long
	// The call may have waited longer than WriteTimeout: the answer gets
	// its own deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
	writeJSON(w, res)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// newInvocationID returns an id in the registry's format: inv_ and 12
// base62 characters.
func newInvocationID() string {
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = base62[int(b[i])%len(base62)]
	}
	return "inv_" + string(b)
}
