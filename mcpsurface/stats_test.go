package mcpsurface_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stats counts what a handler holds open (servers, stateful sessions,
// listen streams) and what it refused (429) or reclaimed to stay within
// MaxSessions, for an application's metrics; after Close it holds
// nothing.
func TestHTTPStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 2
		f := &httpFixture{sessions: twoUsers(t)}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{MaxSessions: limit})
		p := servePipe(f.h)
		defer p.stop()
		defer f.h.Close()
		check := func(want mcpsurface.HTTPStats) {
			t.Helper()
			synctest.Wait()
			if got := f.h.Stats(); got != want {
				t.Fatalf("Stats() = %+v, want %+v", got, want)
			}
		}
		check(mcpsurface.HTTPStats{})

		alice := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
		s1 := alice.open(t)
		time.Sleep(time.Second) // the bubble's clock: s1 is idle the longest
		s2 := alice.open(t)
		check(mcpsurface.HTTPStats{Servers: 1, Sessions: 2})
		s3 := alice.open(t) // s1, idle the longest, makes room
		check(mcpsurface.HTTPStats{Servers: 1, Sessions: 2, Reclaimed: 1})
		if alice.listTools(t, s1) != http.StatusNotFound {
			t.Fatal("s1 was not reclaimed")
		}
		stop2, stop3 := alice.stream(t, s2), alice.stream(t, s3) // every session busy
		if status, _, _, err := alice.post(bg, "", rawInit); err != nil || status != http.StatusTooManyRequests {
			t.Fatalf("one session too many: %d %v", status, err)
		}
		check(mcpsurface.HTTPStats{Servers: 1, Sessions: 2, Refused: 1, Reclaimed: 1})

		// A 2026-07-28 client listening for changes: one stream, no session.
		bob := connectPipe(t, p, "tok-bob", v2026, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
		check(mcpsurface.HTTPStats{Servers: 2, Sessions: 2, ListenStreams: 1, Refused: 1, Reclaimed: 1})
		_ = bob.Close()
		stop2()
		stop3()
		check(mcpsurface.HTTPStats{Servers: 2, Sessions: 2, Refused: 1, Reclaimed: 1})

		_ = f.h.Close()
		check(mcpsurface.HTTPStats{Refused: 1, Reclaimed: 1})
	})
}
