package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// The page lifecycle in virtual time: serving the page mounts the views;
// an open event stream keeps them mounted and the session alive however
// long; once the stream ends the views unmount after PageGrace; an idle
// session then expires after IdleTimeout, with its token and registry.
// AS-LIFE-001 (live on register; removed on unregister), AS-BOUND-001.
func TestPageLifecycleAndIdleExpiry(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		store, err := domain.Open(context.Background(), filepath.Join(dir, "devices.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if err := store.Seed(context.Background()); err != nil {
			t.Fatal(err)
		}
		const grace, idle = 5 * time.Second, 10 * time.Minute
		app, err := console.New(console.Options{Store: store, Host: webhost.Options{PageGrace: grace, IdleTimeout: idle, Heartbeat: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()

		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
		cookie := rec.Result().Cookies()[0]
		sessions := app.Sessions()
		if len(sessions) != 1 {
			t.Fatalf("%d sessions", len(sessions))
		}
		s := sessions[0]
		mounted := func() int { return len(s.Registry().Snapshot(surface.SnapshotOptions{}).Components) }
		if mounted() != 1 {
			t.Fatal("the page's table is not mounted")
		}

		// The page's stream opens and stays open for an hour.
		ctx, closeTab := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1"+eventsPath, nil)
		req.AddCookie(cookie)
		streamDone := make(chan struct{})
		go func() {
			defer close(streamDone)
			app.ServeHTTP(httptest.NewRecorder(), req)
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		if mounted() != 1 || len(app.Sessions()) != 1 {
			t.Fatal("an open page lost its views or its session")
		}

		// The tab closes: the views unmount after the grace period.
		closeTab()
		<-streamDone
		time.Sleep(grace - time.Second)
		synctest.Wait()
		if mounted() != 1 {
			t.Fatal("unmounted before the grace period")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if mounted() != 0 {
			t.Fatal("the closed page's views are still mounted")
		}

		// Idle: the session ends, its token no longer works.
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
		rec = httptest.NewRecorder()
		mreq := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
		mreq.Header.Set("Authorization", "Bearer "+s.Token())
		app.ServeHTTP(rec, mreq)
		if rec.Code != http.StatusUnauthorized || len(app.Sessions()) != 0 {
			t.Fatalf("expired token: %d, %d sessions", rec.Code, len(app.Sessions()))
		}
	})
}

// A session made for a page that never uses it (no event stream, no form
// post: a request without a cookie, a crawler, a flood) is reclaimed once
// UnusedTimeout has passed, with its registry; one the page used is not.
func TestUnusedSessionsReclaimed(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		store, err := domain.Open(context.Background(), filepath.Join(dir, "devices.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		const unused = time.Minute
		app, err := console.New(console.Options{Store: store, Host: webhost.Options{UnusedTimeout: unused, IdleTimeout: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		page := func() *http.Cookie {
			rec := httptest.NewRecorder()
			app.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
			return rec.Result().Cookies()[0]
		}
		page()
		usedCookie := page()
		post := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/ui/clear", nil)
		post.Header.Set("Sec-Fetch-Site", "same-origin")
		post.AddCookie(usedCookie)
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, post)
		if rec.Code != http.StatusSeeOther || len(app.Sessions()) != 2 {
			t.Fatalf("post %d, %d sessions", rec.Code, len(app.Sessions()))
		}
		all := app.Sessions()
		time.Sleep(unused - time.Second)
		synctest.Wait()
		if len(app.Sessions()) != 2 {
			t.Fatalf("reclaimed too early: %d sessions", len(app.Sessions()))
		}
		time.Sleep(unused/4 + 2*time.Second) // the sweep runs every UnusedTimeout/4
		synctest.Wait()
		if len(app.Sessions()) != 1 {
			t.Fatalf("%d sessions, want the used one", len(app.Sessions()))
		}
		for _, s := range all {
			select {
			case <-s.Registry().Done():
				if s == app.Sessions()[0] {
					t.Fatal("the used session's registry closed")
				}
			default:
				if s != app.Sessions()[0] {
					t.Fatal("the unused session's registry is open")
				}
			}
		}
	})
}
