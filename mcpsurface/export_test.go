package mcpsurface

import (
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CachedServers returns how many Servers h holds.
func CachedServers(h *HTTPHandler) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

// OpenSessions returns how many MCP sessions the Servers h holds have
// open.
func OpenSessions(h *HTTPHandler) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.servers {
		for range c.srv.mcp.Sessions() {
			n++
		}
	}
	return n
}

// ServerSessions returns the MCP sessions the Servers h holds have open.
func ServerSessions(h *HTTPHandler) []*mcp.ServerSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*mcp.ServerSession
	for _, c := range h.servers {
		for ss := range c.srv.mcp.Sessions() {
			out = append(out, ss)
		}
	}
	return out
}

// ListedSessions returns how many sessions' catalogs the Servers h holds
// keep.
func ListedSessions(h *HTTPHandler) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.servers {
		sessions, _ := c.srv.pins.counts()
		n += sessions
	}
	return n
}

// ListedClients returns how many session-less clients' catalogs the
// Servers h holds keep.
func ListedClients(h *HTTPHandler) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.servers {
		_, clients := c.srv.pins.counts()
		n += clients
	}
	return n
}

// MaxListedClients is the bound on the session-less clients a Server
// remembers the catalog of.
const MaxListedClients = maxListedClients

// SharedToolDefs returns how many tool definitions the Servers of h
// share.
func SharedToolDefs(h *HTTPHandler) int {
	h.tools.mu.Lock()
	defer h.tools.mu.Unlock()
	return len(h.tools.defs)
}

// ScheduledChangeNotifications returns how many list_changed
// notifications the SDK has scheduled for s and not yet begun to send. It
// reads the go-sdk's (v1.8.0) unexported Server.pendingNotifications,
// whose timers it sets to nil once they are stopped or have fired; call
// it when no goroutine is changing s's lists.
func ScheduledChangeNotifications(s *Server) int {
	v := reflect.ValueOf(s.mcp).Elem().FieldByName("pendingNotifications")
	if !v.IsValid() || v.Kind() != reflect.Map {
		panic("mcpsurface: the SDK has no Server.pendingNotifications map any more: update this probe")
	}
	n := 0
	for it := v.MapRange(); it.Next(); {
		if !it.Value().IsNil() {
			n++
		}
	}
	return n
}
