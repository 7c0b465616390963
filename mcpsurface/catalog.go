package mcpsurface

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolList keeps the tool set of a Server's go-sdk server equal to the
// toolset's catalog (direct mode): it adds the tools that are new or
// whose definition changed, removes the ones that are gone, and knows
// which catalog the tool set shows. The SDK announces each change to the
// connected clients (notifications/tools/list_changed). It is safe for
// concurrent use.
type toolList struct {
	srv     *mcp.Server
	ts      *surface.Toolset
	handler mcp.ToolHandler
	shared  *toolDefs // the definitions, shared with the handler's other servers
	log     *slog.Logger
	// names are Options.ToolNames (capability id → MCP name), byName
	// their inverse; both nil without renames.
	names, byName map[string]string

	// listing is held for reading while the SDK answers tools/list and
	// for writing while apply changes the SDK's tool set, so that the
	// catalog a list records is exactly the list it was sent.
	listing sync.RWMutex

	mu      sync.Mutex
	closed  bool
	dirty   bool             // the catalog may have changed since the last sync
	syncing bool             // some goroutine runs the sync loop
	current *surface.Catalog // the catalog the SDK's tool set shows
	served  map[string]bool  // catalog names of the tools in the SDK's tool set
	// toCatalog maps the MCP name of every renamed tool of the SDK's
	// tool set to its catalog name.
	toCatalog map[string]string

	// defs is every tool this list put on the SDK's server, by catalog
	// name. Only the goroutine running the sync loop uses it, and close
	// once the loop has stopped.
	defs map[string]shown
}

// newToolList returns the tool list of srv, which follows ts. Tools
// Options.ToolNames names get those names.
func newToolList(srv *mcp.Server, ts *surface.Toolset, handler mcp.ToolHandler, shared *toolDefs, log *slog.Logger, names map[string]string) (*toolList, error) {
	l := &toolList{srv: srv, ts: ts, handler: handler, shared: shared, log: log, served: map[string]bool{}, defs: map[string]shown{}}
	if len(names) > 0 {
		l.names, l.byName = map[string]string{}, map[string]string{}
		for capID, name := range names {
			if !validToolName(name) {
				return nil, fmt.Errorf("mcpsurface: Options.ToolNames: %q is not a valid MCP tool name", name)
			}
			if other, dup := l.byName[name]; dup {
				return nil, fmt.Errorf("mcpsurface: Options.ToolNames: %q names both %s and %s", name, other, capID)
			}
			l.names[capID], l.byName[name] = name, capID
		}
	}
	return l, nil
}

// validToolName reports whether name is a valid MCP tool name.
func validToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// sync brings the SDK's tool set up to date with the toolset. Calls
// coalesce: while one goroutine runs the loop, others only mark the
// catalog dirty, so a registry change made from inside user code called
// by Catalog cannot deadlock, and no change is lost.
func (l *toolList) sync() {
	l.mu.Lock()
	l.dirty = true
	if l.syncing {
		l.mu.Unlock()
		return
	}
	l.syncing = true
	for l.dirty && !l.closed {
		l.dirty = false
		l.mu.Unlock()
		l.apply()
		l.mu.Lock()
	}
	l.syncing = false
	l.mu.Unlock()
}

// apply reads the catalog, adds the tools that are new or whose
// definition changed and removes the ones that are gone.
func (l *toolList) apply() {
	defer func() {
		if rec := recover(); rec != nil { // never take the app's goroutine down
			l.log.Error("mcpsurface: updating the tool list panicked", "panic", fmt.Sprint(rec))
		}
	}()
	cat := l.ts.Catalog() // runs app code: outside every lock
	tools := l.rename(cat.Tools())
	l.listing.Lock()
	defer l.listing.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return // close gave the definitions back: add none
	}
	served := make(map[string]bool, len(tools))
	toCatalog := make(map[string]string)
	for _, t := range tools {
		if t.Name != t.catalog {
			toCatalog[t.Name] = t.catalog
		}
		sig := signature(t.Tool)
		if l.defs[t.catalog].sig == sig {
			served[t.catalog] = true
			continue
		}
		def, key, ok := l.shared.acquire(t.Tool)
		if !ok {
			l.log.Error("mcpsurface: tool left out: MCP requires an object input schema", "tool", t.Name, "capabilityId", t.CapabilityID)
			continue
		}
		if old, ok := l.defs[t.catalog]; ok {
			l.shared.release(old.key)
			if old.name != t.Name {
				l.srv.RemoveTools(old.name)
			}
		}
		l.defs[t.catalog] = shown{sig: sig, key: key, name: t.Name}
		served[t.catalog] = true
		l.srv.AddTool(def, l.handler)
	}
	var gone []string
	for name, d := range l.defs {
		if !served[name] {
			gone = append(gone, d.name)
			delete(l.defs, name)
			l.shared.release(d.key)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		l.srv.RemoveTools(gone...)
	}
	l.mu.Lock()
	l.current, l.served, l.toCatalog = cat, served, toCatalog
	l.mu.Unlock()
}

// close stops the list: the sync loop stops, and the shared
// definitions are given back (an apply in progress has finished, and the
// next one sees the list closed). The SDK's tool set stays as it was.
func (l *toolList) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.listing.Lock()
	defer l.listing.Unlock()
	for _, d := range l.defs {
		l.shared.release(d.key)
	}
	clear(l.defs)
}

// list runs answer, the SDK's answer to a tools/list, with the tool set
// held still, and returns the catalog the answer shows (nil before the
// first sync).
func (l *toolList) list(answer func() (mcp.Result, error)) (mcp.Result, error, *surface.Catalog) {
	l.listing.RLock()
	defer l.listing.RUnlock()
	res, err := answer()
	return res, err, l.catalog()
}

// catalog returns the catalog the SDK's tool set shows.
func (l *toolList) catalog() *surface.Catalog {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current
}

// serves reports whether the SDK's tool set has the tool called name in
// the catalog.
func (l *toolList) serves(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served[name]
}

// catalogName returns the catalog name of the tool a client calls by its
// MCP name, with shown the catalog the client was shown (nil if none):
// the same unless Options.ToolNames renamed it. A renamed tool that has
// left the list is found by its capability in shown.
func (l *toolList) catalogName(name string, shown func() *surface.Catalog) string {
	if len(l.names) == 0 {
		return name
	}
	l.mu.Lock()
	c, ok := l.toCatalog[name]
	l.mu.Unlock()
	if ok {
		return c
	}
	capID, ok := l.byName[name]
	if !ok {
		return name
	}
	cat := shown()
	if cat == nil {
		return name
	}
	found := ""
	for _, t := range cat.Tools() {
		if t.CapabilityID == capID {
			if found != "" {
				return name // ambiguous: it was not renamed
			}
			found = t.Name
		}
	}
	return firstNonEmpty(found, name)
}

// catalogName returns the catalog name of the tool a request calls by
// its MCP name: the same unless Options.ToolNames renamed it.
func (s *Server) catalogName(req mcp.Request, name string) string {
	return s.list.catalogName(name, func() *surface.Catalog { return s.pins.shownTo(req) })
}

// namedTool is a catalog entry under its MCP name (Options.ToolNames),
// with its name in the catalog.
type namedTool struct {
	surface.Tool
	catalog string
}

// rename gives the tools the names Options.ToolNames asks for. A name
// applies to a capability with exactly one tool in the catalog, and only
// if no other tool has that name; otherwise the tool keeps its catalog
// name (and the conflict is logged).
func (l *toolList) rename(tools []surface.Tool) []namedTool {
	out := make([]namedTool, len(tools))
	if len(l.names) == 0 {
		for i, t := range tools {
			out[i] = namedTool{t, t.Name}
		}
		return out
	}
	perCap := map[string]int{}
	taken := map[string]bool{}
	for _, t := range tools {
		perCap[t.CapabilityID]++
		taken[t.Name] = true
	}
	for i, t := range tools {
		out[i] = namedTool{t, t.Name}
		name, ok := l.names[t.CapabilityID]
		switch {
		case !ok || name == t.Name:
		case perCap[t.CapabilityID] > 1 || taken[name]:
			l.log.Warn("mcpsurface: tool keeps its name: Options.ToolNames would make it ambiguous", "tool", t.Name, "capabilityId", t.CapabilityID, "name", name)
		default:
			taken[name] = true
			out[i].Name = name
		}
	}
	return out
}

// shown is a tool a list put on the SDK's server: its signature, the key
// of its shared definition and its MCP name.
type shown struct {
	sig, key toolSig
	name     string // its MCP name
}

// toolSig is a digest of everything of a tool that its MCP definition
// shows, and of what a call of it targets.
type toolSig [sha256.Size]byte

// signature identifies everything of a tool that its MCP definition shows,
// and what a call of it targets: a new registration, and for a procedure
// the surface version gates (destructive, external side effect) a new
// version, re-add the tool, so that clients hear tools/list_changed and
// list again rather than call a stale entry.
func signature(t surface.Tool) toolSig {
	target := t.RegistrationID
	if t.Kind == surface.KindProcedure && (t.Effect == surface.EffectDestructive || t.Effect == surface.EffectExternalSideEffect) {
		target += "@" + t.SurfaceVersion
	}
	h := sha256.New()
	for _, s := range []string{t.Name, t.Description, string(t.InputSchema), t.CapabilityID, string(t.Kind), string(t.Effect),
		strconv.FormatBool(t.Idempotent), strconv.FormatBool(t.State.Available), t.State.UnavailableReason, t.State.Note, target} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return toolSig(h.Sum(nil))
}
