package mcpsurface

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
