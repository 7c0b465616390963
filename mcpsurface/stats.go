package mcpsurface

// HTTPStats are what an HTTPHandler holds open and has refused, for an
// application's metrics (gauges and counters). Each count is read at
// one moment, not all at the same one.
type HTTPStats struct {
	// Servers is the number of Servers cached: one per (registry,
	// consumer) in use.
	Servers int
	// Sessions is the number of stateful MCP sessions open (clients up
	// to 2025-11-25; HTTPOptions.MaxSessions caps them per consumer).
	Sessions int
	// ListenStreams is the number of subscriptions/listen streams open
	// (2026-07-28 clients).
	ListenStreams int
	// Refused counts the requests answered 429 since the handler was
	// created: a session or stream beyond HTTPOptions.MaxSessions.
	Refused uint64
	// Reclaimed counts the idle sessions closed since the handler was
	// created to make room for a new one.
	Reclaimed uint64
}

// Stats returns what h holds open and has refused. It is cheap (it
// counts what h keeps; no request is made) and safe to call at any time,
// also after Close.
func (h *HTTPHandler) Stats() HTTPStats {
	h.mu.Lock()
	st := HTTPStats{Servers: len(h.servers), Refused: h.refused, Reclaimed: h.reclaimed}
	servers := make([]*Server, 0, len(h.servers))
	for _, c := range h.servers {
		servers = append(servers, c.srv)
		st.ListenStreams += c.listening
	}
	h.mu.Unlock()
	for _, s := range servers {
		for ss := range s.mcp.Sessions() {
			if ss.ID() != "" { // a session-less request's temporary session has none
				st.Sessions++
			}
		}
	}
	return st
}
