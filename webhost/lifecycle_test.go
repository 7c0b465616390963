package webhost_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
	"pgregory.net/rapid"
)

// vhost is a Host served in a synctest bubble, without a network:
// requests go straight to its handler.
type vhost struct {
	t       *testing.T
	h       *webhost.Host
	handler http.Handler
}

func newVHost(t *testing.T, opts webhost.Options) *vhost {
	t.Helper()
	if opts.NewViews == nil {
		opts.NewViews = newBoard
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 24 * time.Hour
	}
	h, err := webhost.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return &vhost{t: t, h: h, handler: h.Handler(mux(h))}
}

// page serves the page, with cookie if not nil, and returns the cookie.
func (v *vhost) page(cookie *http.Cookie) *http.Cookie {
	v.t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	v.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		v.t.Fatalf("GET /: %d", rec.Code)
	}
	if cs := rec.Result().Cookies(); len(cs) > 0 {
		return cs[0]
	}
	return cookie
}

// open opens an event stream with cookie; close ends it and waits until
// its handler returned.
func (v *vhost) open(cookie *http.Cookie) (closeTab func()) {
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/agentsurface/events?f=notes", nil)
	req.AddCookie(cookie)
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.handler.ServeHTTP(httptest.NewRecorder(), req)
	}()
	return func() {
		cancel()
		<-done
	}
}

// post posts a form of the page with cookie and returns the status.
func (v *vhost) post(cookie *http.Cookie, path string) int {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+path, nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	v.handler.ServeHTTP(rec, req)
	return rec.Code
}

func mounted(s *webhost.Session) int {
	return len(s.Registry().Snapshot(surface.SnapshotOptions{}).Components)
}

// The page lifecycle in virtual time: serving the page mounts the views,
// for PageGrace if no stream connects; an open event stream keeps them
// mounted and the session alive however long; once the stream ends they
// unmount after PageGrace (their Mount context ends, and the components
// it registered go); an idle session then expires after IdleTimeout,
// with its token and registry. AS-LIFE-001 (live on register; removed
// and aborted on unregister).
func TestPageLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace, idle = 5 * time.Second, 10 * time.Minute
		v := newVHost(t, webhost.Options{PageGrace: grace, IdleTimeout: idle})
		cookie := v.page(nil)
		s := v.h.Sessions()[0]
		if mounted(s) != 1 || !s.Shown() {
			t.Fatal("serving the page did not mount the views")
		}
		// No stream connects: unmounted after the grace.
		time.Sleep(grace + time.Second)
		synctest.Wait()
		if mounted(s) != 0 || s.Shown() {
			t.Fatal("a page whose stream never came is still mounted")
		}

		closeTab := v.open(cookie)
		synctest.Wait()
		if mounted(s) != 1 || boardOf(s).mounts != 2 {
			t.Fatalf("the stream did not mount the views again: %d mounted, %d mounts", mounted(s), boardOf(s).mounts)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if mounted(s) != 1 || v.h.Session(s.ID()) == nil {
			t.Fatal("an open page lost its views or its session")
		}

		closeTab()
		time.Sleep(grace - time.Second)
		synctest.Wait()
		if mounted(s) != 1 {
			t.Fatal("unmounted before the grace period")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if mounted(s) != 0 {
			t.Fatal("the closed page's views are still mounted")
		}

		time.Sleep(idle + time.Minute)
		synctest.Wait()
		select {
		case <-s.Done():
		default:
			t.Fatal("the idle session did not expire")
		}
		select {
		case <-s.Registry().Done():
		default:
			t.Fatal("the expired session's registry is open")
		}
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token())
		rec := httptest.NewRecorder()
		v.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || len(v.h.Sessions()) != 0 {
			t.Fatalf("expired token: %d, %d sessions", rec.Code, len(v.h.Sessions()))
		}
	})
}

// A session made for a page that never uses it (no event stream, no
// form post: a request without a cookie, a crawler, a flood) is
// reclaimed once UnusedTimeout has passed, with its registry; one the
// page used is not.
func TestUnusedSessionsReclaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const unused = time.Minute
		v := newVHost(t, webhost.Options{UnusedTimeout: unused, IdleTimeout: time.Hour})
		v.page(nil)
		usedCookie := v.page(nil)
		if code := v.post(usedCookie, "/notes"); code != http.StatusSeeOther {
			t.Fatalf("post %d", code)
		}
		if st := v.h.Stats(); st.Sessions != 1 || st.UnusedSessions != 1 {
			t.Fatalf("%+v", st)
		}
		all := v.h.Sessions()
		time.Sleep(unused - time.Second)
		synctest.Wait()
		if len(v.h.Sessions()) != 2 {
			t.Fatal("reclaimed too early")
		}
		time.Sleep(unused/4 + 2*time.Second) // the sweep runs every UnusedTimeout/4
		synctest.Wait()
		live := v.h.Sessions()
		if len(live) != 1 {
			t.Fatalf("%d sessions, want the used one", len(live))
		}
		for _, s := range all {
			select {
			case <-s.Registry().Done():
				if s == live[0] {
					t.Fatal("the used session's registry closed")
				}
			default:
				if s != live[0] {
					t.Fatal("the unused session's registry is open")
				}
			}
		}
	})
}

// A pending approval of a component that unmounts can never let a call
// through (resolution precedes confirmation): the Host expires it when
// the component goes, and the decisions say it expired. AS-LIFE-001,
// AS-CONFIRM-006 (expiry).
func TestUnmountExpiresItsApprovals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 5 * time.Second
		v := newVHost(t, webhost.Options{PageGrace: grace})
		cookie := v.page(nil)
		closeTab := v.open(cookie)
		s := v.h.Sessions()[0]
		synctest.Wait()
		boardOf(s).add("x")
		res := s.Registry().Invoke(context.Background(), surface.Invocation{CapabilityID: "view:notes.board.clear"}, surface.InvokeOptions{})
		if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired || len(s.Pending()) != 1 {
			t.Fatalf("%+v", res)
		}
		closeTab()
		time.Sleep(grace + time.Second)
		synctest.Wait()
		if len(s.Pending()) != 0 {
			t.Fatal("the unmounted component's approval is still pending")
		}
		ds := s.Decisions()
		if len(ds) != 1 || ds[0].Outcome != surface.OutcomeExpired || ds[0].Actor != "" || ds[0].Call != nil {
			t.Fatalf("decisions %+v", ds)
		}
	})
}

// Property: whatever the sequence of page loads, stream opens and
// closes, and waits, at every quiet moment the views are mounted — with
// their one component registered, once — exactly when a stream is open
// or a page was served or a stream closed less than PageGrace ago; Mount
// never runs while mounted. AS-LIFE-001, AS-LIFE-004 (unique live ids).
func TestLifecycleProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		steps := rapid.SliceOfN(rapid.IntRange(0, 3), 1, 30).Draw(rt, "steps")
		waits := rapid.SliceOfN(rapid.IntRange(0, 8000), len(steps), len(steps)).Draw(rt, "waits")
		var failure string
		synctest.Test(t, func(t *testing.T) {
			const grace = 5 * time.Second
			v := newVHost(t, webhost.Options{PageGrace: grace, IdleTimeout: 24 * time.Hour, UnusedTimeout: 24 * time.Hour})
			cookie := v.page(nil)
			s := v.h.Sessions()[0]
			lastSeen := time.Now() // when the page was last served or its last stream closed
			var tabs []func()
			for i, step := range steps {
				switch step {
				case 0:
					v.page(cookie)
					if len(tabs) == 0 {
						lastSeen = time.Now()
					}
				case 1:
					tabs = append(tabs, v.open(cookie))
				case 2:
					if len(tabs) > 0 {
						tabs[0]()
						tabs = tabs[1:]
						if len(tabs) == 0 {
							lastSeen = time.Now()
						}
					}
				}
				time.Sleep(time.Duration(waits[i]) * time.Millisecond)
				synctest.Wait()
				elapsed := time.Since(lastSeen)
				if elapsed == grace {
					continue // the timer and the check race by design at this instant
				}
				want := len(tabs) > 0 || elapsed < grace
				if got := s.Shown(); got != want {
					failure = fmt.Sprintf("step %d: shown %v, want %v (tabs %d, %v since the page)", i, got, want, len(tabs), elapsed)
					break
				}
				if n := mounted(s); (n == 1) != want || n > 1 {
					failure = fmt.Sprintf("step %d: %d components mounted, shown %v", i, n, want)
					break
				}
			}
			for _, closeTab := range tabs {
				closeTab()
			}
		})
		if failure != "" {
			rt.Fatal(failure)
		}
	})
}
