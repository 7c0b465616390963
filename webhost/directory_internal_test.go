package webhost

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// nopViews mount nothing and render nothing.
type nopViews struct{}

func (nopViews) Mount(context.Context, *Session) error             { return nil }
func (nopViews) Fragment(context.Context, io.Writer, string) error { return ErrNoFragment }
func newNopViews(*Session) (Views, error)                          { return nopViews{}, nil }

// checkDirectory checks the directory's invariants.
func checkDirectory(t *rapid.T, h *Host) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := &h.dir
	used, unused := 0, 0
	for id, s := range d.byID {
		if s.id != id {
			t.Fatalf("session %s indexed as %s", s.id, id)
		}
		for i, secret := range [...]string{credCookie: cookieOf(s.join), credToken: s.token, credJoin: s.join} {
			if d.by[i][keyOf(secret)] != s || s.keys[i] != keyOf(secret) {
				t.Fatalf("session %s not found by credential %d", id, i)
			}
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			t.Fatalf("a closed session %s is in the directory", id)
		}
		if s.unused {
			unused++
		} else {
			used++
		}
	}
	for i := range d.by {
		if len(d.by[i]) != len(d.byID) {
			t.Fatalf("credential %d indexes %d sessions, byID %d", i, len(d.by[i]), len(d.byID))
		}
	}
	if used != d.used || unused != len(d.unused) {
		t.Fatalf("counted used %d unused %d, recorded %d %d", used, unused, d.used, len(d.unused))
	}
	if d.used > h.opts.MaxSessions || len(d.unused) > h.opts.MaxUnusedSessions {
		t.Fatalf("bounds: used %d > %d or unused %d > %d", d.used, h.opts.MaxSessions, len(d.unused), h.opts.MaxUnusedSessions)
	}
}

// Property: whatever visitors, uses, streams, closes and sweeps happen,
// the directory stays consistent (every live session findable by each
// of its credentials, none closed, the counts right) and within its
// bounds, and a closed session's credentials find nothing.
func TestDirectoryProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h, err := New(Options{NewViews: newNopViews, MaxSessions: 3, MaxUnusedSessions: 2, MCP: MCPOptions{Disabled: true}})
		if err != nil {
			rt.Fatal(err)
		}
		defer h.Close()
		var known []*Session
		var tabs []func()
		defer func() {
			for _, c := range tabs {
				c()
			}
		}()
		pick := func() *Session {
			if len(known) == 0 {
				return nil
			}
			return known[rapid.IntRange(0, len(known)-1).Draw(rt, "which")]
		}
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0: // a visitor's page
				if s, err := h.create(context.Background(), "", false, false, nil); err == nil {
					known = append(known, s)
				}
			case 1: // a session of the host API
				if s, err := h.NewSession(SessionOptions{}); err == nil {
					known = append(known, s)
				}
			case 2: // a form post
				if s := pick(); s != nil {
					got, err := h.lookup(credCookie, cookieOf(s.join), true)
					if err == nil && got != nil && got != s {
						rt.Fatalf("cookie of %s found %s", s.id, got.id)
					}
				}
			case 3: // an event stream opens
				if s := pick(); s != nil {
					if got, err := h.lookup(credCookie, cookieOf(s.join), true); err == nil && got != nil {
						if st, ok := got.streamOpened(nil, false); ok {
							tabs = append(tabs, func() { got.streamClosed(st) })
						}
					}
				}
			case 4: // a stream closes
				if len(tabs) > 0 {
					tabs[0]()
					tabs = tabs[1:]
				}
			case 5:
				if s := pick(); s != nil {
					s.Close()
				}
			case 6:
				h.sweep(time.Now().Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "minutes")) * time.Minute))
			}
			checkDirectory(rt, h)
			for _, s := range known {
				select {
				case <-s.Done():
					for kind, secret := range []string{cookieOf(s.join), s.token, s.join} {
						if got, _ := h.lookup(credential(kind), secret, false); got != nil {
							rt.Fatalf("an ended session's credential %d finds %s", kind, got.id)
						}
					}
				default:
				}
			}
		}
	})
}

// Fragment ids in the stream's query are untrusted: any query is either
// refused or gives at most 64 distinct well-formed ids.
func FuzzParseFragments(f *testing.F) {
	for _, seed := range []string{"f=a,b", "f=a&f=b,c", "f=" + strings.Repeat("x,", 80), "f=<script>", "f=a%2Cb", "f=,,,", "f=a:b.c-d_e"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/agentsurface/events", nil)
		r.URL.RawQuery = query
		ids, err := parseFragments(r)
		if err != nil {
			return
		}
		if len(ids) > maxFragments {
			t.Fatalf("%d ids", len(ids))
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if !fragmentID.MatchString(id) || seen[id] {
				t.Fatalf("id %q (seen %v)", id, seen[id])
			}
			seen[id] = true
		}
	})
}

// The Host check takes any Host header: a name is served only when it is
// loopback or allowed, whatever its case, port, brackets or trailing dot.
func FuzzHostAllowed(f *testing.F) {
	for _, seed := range []string{"localhost:8080", "127.0.0.1", "[::1]:80", "app.example.com", "APP.example.com.", "evil.localhost.example",
		"127.0.0.1.evil", "app.example.com.evil", "", ":80", "[::ffff:127.0.0.1]"} {
		f.Add(seed)
	}
	h := &Host{opts: Options{AllowedHosts: []string{"app.example.com"}}}
	f.Fuzz(func(t *testing.T, host string) {
		if !h.hostAllowed(host) {
			return
		}
		name := host
		if n, _, err := net.SplitHostPort(host); err == nil {
			name = n
		}
		name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
		ip := net.ParseIP(name)
		if name != "app.example.com" && name != "localhost" && !strings.HasSuffix(name, ".localhost") && (ip == nil || !ip.IsLoopback()) {
			t.Fatalf("allowed %q (name %q)", host, name)
		}
	})
}
