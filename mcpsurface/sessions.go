package mcpsurface

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What a client holds open is bounded per (registry, consumer) by
// HTTPOptions.MaxSessions, and an abandoned session never locks its
// credential out: a stateful session with no request in progress and no
// open stream is idle, and when opening a session would exceed the cap,
// the session idle the longest is closed to make room. Only when every
// session is busy is the new one refused.

// sessionUse is what ServeHTTP knows of one stateful session.
type sessionUse struct {
	active   int       // requests in progress; an open GET stream is one
	lastUsed time.Time // when it opened, or its last request ended
	// opened is set once the initialize that opened the session has
	// returned; until then only requests count it, and it is not
	// reclaimed.
	opened bool
}

// use counts a request of session sid in progress. It returns nil when
// the session is being reclaimed: the request is answered 404.
func (h *HTTPHandler) use(c *cached, sid string) *sessionUse {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := c.reclaiming[sid]; ok {
		return nil
	}
	u := c.sessions[sid]
	if u == nil {
		// A request of a session whose initialize has not returned yet,
		// or of an id the SDK does not know (it answers 404).
		u = &sessionUse{}
		if c.sessions == nil {
			c.sessions = map[string]*sessionUse{}
		}
		c.sessions[sid] = u
	}
	u.active++
	return u
}

// release ends a request use counted.
func (h *HTTPHandler) release(c *cached, sid string, u *sessionUse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	u.active--
	u.lastUsed = time.Now()
	if u.active == 0 && !u.opened && c.sessions[sid] == u {
		delete(c.sessions, sid)
		c.sessions = orNil(c.sessions)
	}
}

// reserve counts a session about to be opened for c. When c has
// MaxSessions open or opening, it makes room by choosing idle sessions
// for reclaim, the longest idle first, and returns their ids; the caller
// closes them. It refuses (ok false) only when no open session is idle.
// The SDK's sessions of probes and of requests in progress are not
// counted.
func (h *HTTPHandler) reserve(c *cached) (ok bool, victims []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	limit := h.opts.MaxSessions
	if limit > 0 && c.opening+h.openLocked(c) >= limit {
		h.forgetEndedLocked(c)
		for c.opening+h.openLocked(c) >= limit {
			id := idlest(c)
			if id == "" {
				return false, victims
			}
			delete(c.sessions, id)
			if c.reclaiming == nil {
				c.reclaiming = map[string]struct{}{}
			}
			c.reclaiming[id] = struct{}{}
			victims = append(victims, id)
		}
	}
	c.opening++
	return true, victims
}

// openLocked counts the sessions of c an initialize has opened.
func (h *HTTPHandler) openLocked(c *cached) int {
	n := 0
	for _, u := range c.sessions {
		if u.opened {
			n++
		}
	}
	return n
}

// forgetEndedLocked drops the sessions the SDK has closed (timed out,
// deleted) from c's accounting.
func (h *HTTPHandler) forgetEndedLocked(c *cached) {
	live := make(map[string]bool, len(c.sessions))
	for ss := range c.srv.mcp.Sessions() {
		live[ss.ID()] = true
	}
	for id, u := range c.sessions {
		if u.opened && u.active == 0 && !live[id] {
			delete(c.sessions, id)
		}
	}
	c.sessions = orNil(c.sessions)
}

// forget drops session sid, which a DELETE ended, from c's accounting.
func (h *HTTPHandler) forget(c *cached, sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(c.sessions, sid)
	c.sessions = orNil(c.sessions)
}

// idlest returns the opened session of c with no request in progress
// that has been idle the longest, or "".
func idlest(c *cached) string {
	var best string
	var at time.Time
	for id, u := range c.sessions {
		if !u.opened || u.active > 0 {
			continue
		}
		if best == "" || u.lastUsed.Before(at) || (u.lastUsed.Equal(at) && id < best) {
			best, at = id, u.lastUsed
		}
	}
	return best
}

// reclaim closes the sessions reserve chose to make room, and logs it.
func (h *HTTPHandler) reclaim(c *cached, victims []string) {
	if len(victims) == 0 {
		return
	}
	for _, id := range victims {
		c.srv.closeSession(id) // ends calls an abandoned request left running
		for ss := range c.srv.mcp.Sessions() {
			if ss.ID() == id {
				_ = ss.Close()
			}
		}
		c.srv.sessionClosed(id, true)
	}
	h.mu.Lock()
	for _, id := range victims {
		delete(c.reclaiming, id)
	}
	c.reclaiming = orNil(c.reclaiming)
	h.reclaimed += uint64(len(victims))
	h.mu.Unlock()
	h.log.Info("mcpsurface: closed idle sessions to make room for a new one", "closed", len(victims), "maxSessions", h.opts.MaxSessions)
}

// unreserve ends a reservation; sid is the id of the session its
// request opened, if any.
func (h *HTTPHandler) unreserve(c *cached, sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.opening--
	if sid == "" || h.opts.MaxSessions <= 0 {
		return
	}
	u := c.sessions[sid]
	if u == nil {
		u = &sessionUse{}
		if c.sessions == nil {
			c.sessions = map[string]*sessionUse{}
		}
		c.sessions[sid] = u
	}
	u.opened = true
	u.lastUsed = time.Now()
}

// listen counts a subscriptions/listen stream of c, unless c has
// MaxSessions of them open: a stream is never idle, so none is reclaimed.
func (h *HTTPHandler) listen(c *cached) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if limit := h.opts.MaxSessions; limit > 0 && c.listening >= limit {
		return false
	}
	c.listening++
	return true
}

func (h *HTTPHandler) unlisten(c *cached) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.listening--
}

// tooManySessions answers a request that would open a session or a
// stream beyond MaxSessions: 429 with a JSON-RPC error response to the
// request.
func (h *HTTPHandler) tooManySessions(w http.ResponseWriter, body *peeked) {
	var id jsonrpc.ID // null unless the body is one request
	if body != nil && body.whole && len(body.reqs) == 1 {
		id = body.reqs[0].ID
	}
	data, _ := json.Marshal(map[string]int{"maxSessions": h.opts.MaxSessions})
	resp, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code: CodeTooManySessions,
		Message: fmt.Sprintf("Too many MCP sessions are in use for this user (the limit is %d). "+
			"End one with an HTTP DELETE of its Mcp-Session-Id, or close a subscriptions/listen stream.", h.opts.MaxSessions),
		Data: data,
	}})
	h.mu.Lock()
	h.refused++
	h.mu.Unlock()
	h.log.Warn("mcpsurface: refused a session beyond MaxSessions", "maxSessions", h.opts.MaxSessions)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(resp)
}
