package webhost

import "sync"

// Stats are the Host's counters and gauges, for an application to export
// to its metrics system ([Host.Stats]).
type Stats struct {
	// Sessions is the number of sessions in use; UnusedSessions those
	// made for a visitor's first page and not used yet.
	Sessions, UnusedSessions int
	// ShownSessions is the number of sessions whose views are mounted.
	ShownSessions int
	// Streams is the number of open event streams (pages).
	Streams int
	// MCPRequests counts the requests to the MCP endpoint.
	MCPRequests uint64
	// Notifying is the number of calls of Options.Notifier.Notify
	// running (those Close abandoned included, until they return).
	Notifying int
	// NotifyFailed counts the calls of Options.Notifier.Notify that
	// failed (an error, a panic); NotifyDropped the confirmation
	// requests not notified because MaxConcurrent calls were running.
	NotifyFailed, NotifyDropped uint64
	// Refused counts the requests refused, by reason.
	Refused Refusals
}

// Refusals counts refused requests by reason.
type Refusals struct {
	// Host: a Host header the Host does not serve (421).
	Host uint64
	// CrossOrigin: a cross-origin request to an Action route (403).
	CrossOrigin uint64
	// Unauthenticated: Options.User refused the request (401).
	Unauthenticated uint64
	// Ended: the request named no live session (401, 410, 404; MCP 401).
	Ended uint64
	// Approve: requests of the approve page refused for what they
	// named or sent: a forged, malformed, used or expired approve link,
	// a request that is not pending (or not of the session), a bad form,
	// a refused grant, a missing credential (404, 410, 400, 409, 401,
	// 503). Each is logged at warn. Another user's request counts as
	// OtherUser, a cross-origin post as CrossOrigin.
	Approve uint64
	// OtherUser: the request's user is not the session's (403).
	OtherUser uint64
	// Full: MaxSessions sessions had open pages (503).
	Full uint64
	// Unavailable: the replicas' directory could not claim a new
	// session (503).
	Unavailable uint64
	// TooLarge: a request body over MaxBodyBytes (413).
	TooLarge uint64
	// PushedOut: event streams ended by newer ones of their session
	// beyond MaxStreams.
	PushedOut uint64
	// SlowClients: event streams cut because a write took longer than
	// WriteTimeout.
	SlowClients uint64
}

// counters are the Host's counts; mu guards them all.
type counters struct {
	mu                                                         sync.Mutex
	host, crossOrigin, unauthenticated, ended, otherUser, full uint64
	unavailable, tooLarge, pushedOut, slowClients, mcpRequests uint64
	approve, notifyFailed, notifyDropped                       uint64
	shownN, streamsN                                           int
}

// add counts one more of the counter c points at (a field of cs).
func (cs *counters) add(c *uint64) {
	cs.mu.Lock()
	*c++
	cs.mu.Unlock()
}

func (cs *counters) shown(d int) {
	cs.mu.Lock()
	cs.shownN += d
	cs.mu.Unlock()
}

func (cs *counters) streams(d int) {
	cs.mu.Lock()
	cs.streamsN += d
	cs.mu.Unlock()
}

// Stats returns the Host's counters and gauges now.
func (h *Host) Stats() Stats {
	h.mu.Lock()
	used, unused := h.dir.used, len(h.dir.unused)
	h.mu.Unlock()
	h.notifier.mu.Lock()
	notifying := h.notifier.running
	h.notifier.mu.Unlock()
	c := &h.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Sessions: used, UnusedSessions: unused, ShownSessions: c.shownN, Streams: c.streamsN, MCPRequests: c.mcpRequests,
		Notifying: notifying, NotifyFailed: c.notifyFailed, NotifyDropped: c.notifyDropped,
		Refused: Refusals{
			Host: c.host, CrossOrigin: c.crossOrigin, Unauthenticated: c.unauthenticated, Ended: c.ended, Approve: c.approve,
			OtherUser: c.otherUser, Full: c.full, Unavailable: c.unavailable, TooLarge: c.tooLarge,
			PushedOut: c.pushedOut, SlowClients: c.slowClients,
		},
	}
}
