package webhost

// The event stream of a page: server-sent events carrying the HTML of
// the live fragments that changed ("patch"), the WebMCP tools to offer
// ("tools"), and the end of the stream ("ended", "bye").

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// renderEvery is the shortest interval between two renders of one
// stream: changes in between are rendered together.
const renderEvery = 100 * time.Millisecond

// maxFragments is how many live fragments a page may have: a stream
// keeps which changed in one word.
const maxFragments = 64

// fragmentID is the form of a live fragment's element id.
var fragmentID = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_:.-]{0,63}$`)

// stream is one open event stream of a session's page.
type stream struct {
	s       *Session
	ids     []string      // the page's live fragments
	webmcp  bool          // the page offers the session's tools through WebMCP
	signal  chan struct{} // a render is pending
	evicted chan struct{} // closed when newer streams pushed this one out
	seq     uint64
	dirty   uint64 // guarded by s.mu: the fragments to render, by position in ids
	tools   bool   // guarded by s.mu: the tools to offer may have changed
}

// mark marks fragments ids (all when empty) to render; s.mu is held. It
// never blocks: a stream that has a render pending needs no second
// signal.
func (st *stream) mark(ids []string) {
	before := st.dirty
	if len(ids) == 0 {
		st.dirty = 1<<len(st.ids) - 1
		st.tools = st.webmcp
	} else {
		for i, id := range st.ids {
			for _, x := range ids {
				if x == id {
					st.dirty |= 1 << i
				}
			}
		}
	}
	if st.dirty != before || st.tools {
		st.wake()
	}
}

// markTools marks the offered tools to check; s.mu is held.
func (st *stream) markTools() {
	st.tools = true
	st.wake()
}

func (st *stream) wake() {
	select {
	case st.signal <- struct{}{}:
	default:
	}
}

// take returns what to render and clears it.
func (st *stream) take() (fragments uint64, tools bool) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	fragments, tools = st.dirty, st.tools
	st.dirty, st.tools = 0, false
	return fragments, tools
}

// streamOpened registers an event stream of the session's page, which
// mounts the views. Beyond Options.MaxStreams streams of the session the
// oldest is pushed out: each stream costs renders, so their number is
// bounded.
func (s *Session) streamOpened(ids []string, webmcp bool) (*stream, bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	s.seq++
	st := &stream{s: s, ids: ids, webmcp: webmcp, signal: make(chan struct{}, 1), evicted: make(chan struct{}), seq: s.seq}
	if len(s.streams) >= s.h.opts.MaxStreams {
		var oldest *stream
		for x := range s.streams {
			if oldest == nil || x.seq < oldest.seq {
				oldest = x
			}
		}
		delete(s.streams, oldest)
		close(oldest.evicted)
		s.h.stats.add(&s.h.stats.pushedOut)
	}
	if s.streams == nil {
		s.streams = map[*stream]struct{}{}
	}
	s.streams[st] = struct{}{}
	s.lastSeen = time.Now()
	s.want = true
	s.stopPageTimerLocked()
	s.mu.Unlock()
	s.h.stats.streams(+1)
	s.reconcile()
	return st, true
}

// streamClosed unregisters an event stream; the page counts as closed
// when no stream reopens within PageGrace.
func (s *Session) streamClosed(st *stream) {
	s.mu.Lock()
	delete(s.streams, st) // gone already if it was pushed out
	s.lastSeen = time.Now()
	if len(s.streams) == 0 && !s.closed {
		s.armPageTimerLocked()
	}
	s.mu.Unlock()
	s.h.stats.streams(-1)
}

// parseFragments reads the live fragments a page names in its stream's
// query (f=id,id,…).
func parseFragments(r *http.Request) ([]string, error) {
	var ids []string
	for _, v := range r.URL.Query()["f"] {
		for id := range strings.SplitSeq(v, ",") {
			if id == "" {
				continue
			}
			if !fragmentID.MatchString(id) {
				return nil, fmt.Errorf("invalid fragment id %q", id)
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) > maxFragments {
		return nil, fmt.Errorf("more than %d fragments", maxFragments)
	}
	return ids, nil
}

// serveEvents streams a page's live fragments as server-sent events: all
// of them at once, then those that changed, as the session changes. A
// page that offers tools through WebMCP opens it with webmcp=1 and gets
// a "tools" event with the tools to offer at once and whenever they
// change. The stream keeps the page shown; it ends when the client goes,
// a write cannot be made within WriteTimeout, the session ends ("ended")
// or newer streams of the session push it out ("bye").
func (h *Host) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		// Another site's page cannot follow (and keep alive) a session.
		h.stats.add(&h.stats.crossOrigin)
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	ids, err := parseFragments(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// 410 for an ended session: EventSource gives up instead of
	// reconnecting, and the page's script loads the page again.
	s := h.requestSession(w, r, http.StatusGone)
	if s == nil {
		return
	}
	webmcp := r.URL.Query().Get("webmcp") == "1" && !h.opts.WebMCP.Disabled
	st, ok := s.streamOpened(ids, webmcp)
	if !ok {
		h.stats.add(&h.stats.ended)
		http.Error(w, "This session has ended.", http.StatusGone)
		return
	}
	defer s.streamClosed(st)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(p []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
		_, err := w.Write(p)
		if err == nil {
			err = rc.Flush()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			h.stats.add(&h.stats.slowClients)
			h.log.Debug("webhost: a slow client's event stream was cut", "session", s.id)
		}
		return err == nil
	}
	ctx := r.Context()
	sent, sentTools := make([]string, len(ids)), ""
	for i := range sent {
		sent[i] = "\x00" // no HTML: the first render sends every fragment, empty ones too
	}
	send := func(fragments uint64, tools bool) bool {
		// A buffer per render, not per stream: a page open for hours
		// would otherwise hold its largest fragment's size between
		// renders.
		var buf bytes.Buffer
		patch := map[string]string{}
		for i, id := range st.ids {
			if fragments&(1<<i) == 0 {
				continue
			}
			buf.Reset()
			if !s.render(ctx, &buf, id) {
				continue
			}
			if html := buf.String(); sent[i] != html {
				patch[id], sent[i] = html, html
			}
		}
		if len(patch) > 0 {
			b, _ := json.Marshal(patch)
			if !write(append(append([]byte("event: patch\ndata: "), b...), "\n\n"...)) {
				return false
			}
		}
		if !tools {
			return true
		}
		list, err := s.tools().list()
		if err != nil {
			return true // the session is ending: "ended" follows
		}
		b, _ := json.Marshal(list)
		if string(b) == sentTools {
			return true
		}
		sentTools = string(b)
		return write([]byte("event: tools\ndata: " + sentTools + "\n\n"))
	}
	st.take() // the first render is of everything
	if !write([]byte("retry: 1000\n\n")) || !send(1<<len(ids)-1, webmcp) {
		return
	}
	// Changes are rendered at most once per renderEvery: a burst of them
	// waits for the timer and is rendered together.
	last := time.Now()
	var throttle <-chan time.Time
	beat := time.NewTicker(h.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Done():
			// The page reconnects: a fresh session where this one is gone.
			write([]byte("event: ended\ndata: This session has ended.\n\n"))
			return
		case <-st.evicted:
			write([]byte("event: bye\ndata: This session is open in too many tabs: this one stopped following it. Reload to follow it here.\n\n"))
			return
		case <-st.signal:
			if wait := renderEvery - time.Since(last); wait > 0 {
				if throttle == nil {
					throttle = time.After(wait)
				}
				continue
			}
			if !send(st.take()) {
				return
			}
			last = time.Now()
		case <-throttle:
			throttle = nil
			if !send(st.take()) {
				return
			}
			last = time.Now()
		case <-beat.C:
			if !write([]byte(": heartbeat\n\n")) {
				return
			}
		}
	}
}

// render renders the live fragment id into buf; it reports false when
// there is nothing to send (an id the views do not render, or an error,
// which is logged).
func (s *Session) render(ctx context.Context, buf *bytes.Buffer, id string) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			s.h.log.Error("webhost: rendering a fragment panicked", "session", s.id, "fragment", id, "panic", fmt.Sprint(p))
			ok = false
		}
	}()
	var err error
	if id == ApprovalsID {
		err = s.h.renderApprovals(buf, s)
	} else {
		err = s.views.Fragment(ctx, buf, id)
	}
	switch {
	case errors.Is(err, ErrNoFragment):
		return false
	case err != nil:
		s.h.log.Error("webhost: cannot render a fragment", "session", s.id, "fragment", id, "error", err)
		return false
	}
	return true
}
