package mcpsurface_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ignoring returns client options whose elicitation handler reports each
// question on asked and never answers: it returns only when its context
// ends or release is closed.
func ignoring(asked chan<- struct{}, release <-chan struct{}) *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return nil, errors.New("the user walked away")
		}
	}}
}

// outcome is what a tool call returned.
type outcome struct {
	res *mcp.CallToolResult
	err error
}

func callAsync(cs *mcp.ClientSession, name string, args any) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args})
		ch <- outcome{res, err}
	}()
	return ch
}

// A client that never answers a confirmation elicitation holds the tool
// call until the confirmation expires, not longer: the call then returns
// CONFIRMATION_INVALID expired (retry with-confirmation), the registry's
// record is expired, nothing executed. Older clients are asked through
// elicitation/create while the call waits; at 2026-07-28 the server does
// not wait at all.
func TestUnansweredElicitationEndsAtConfirmationExpiry(t *testing.T) {
	for _, mode := range []surface.ToolsetMode{surface.ToolsetDirect, surface.ToolsetMeta} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const ttl = 3 * time.Minute
				reg, a, _ := newAppWith(t, &surface.Options{Limits: surface.Limits{ConfirmationTTL: ttl}})
				srv := newServer(t, reg, &mcpsurface.Options{Elicit: true, Mode: mode})
				asked, release := make(chan struct{}, 1), make(chan struct{})
				cs := connect(t, srv, v2025, ignoring(asked, release))
				defer close(release) // before the cleanups close the session

				start := time.Now()
				name, args := "view_devices__table__wipe", any(map[string]any{"ids": []string{"d1"}})
				if mode == surface.ToolsetMeta {
					name, args = "surface_act", map[string]any{"capabilityId": "view:devices.table.wipe", "input": map[string]any{"ids": []string{"d1"}}}
				}
				done := callAsync(cs, name, args)
				<-asked
				synctest.Wait()
				if len(reg.Confirmations().Pending()) != 1 {
					t.Fatal("no pending confirmation while the client is asked")
				}
				select {
				case o := <-done:
					t.Fatalf("the call returned before the expiry: %+v %v", o.res, o.err)
				default:
				}
				o := <-done
				if elapsed := time.Since(start); elapsed != ttl {
					t.Fatalf("the call ended after %v, want the TTL %v", elapsed, ttl)
				}
				if o.err != nil {
					t.Fatalf("the call failed: %v", o.err)
				}
				e := requireCode(t, decode(t, o.res), surface.CodeConfirmationInvalid)
				if e.Details["reason"] != "expired" || e.Retry != string(surface.RetryWithConfirmation) {
					t.Fatalf("%+v", e)
				}
				if len(reg.Confirmations().Pending()) != 0 || a.wipes.Load() != 0 {
					t.Fatalf("pending %d, wipes %d", len(reg.Confirmations().Pending()), a.wipes.Load())
				}
			})
		})
	}
}

// Server.Close ends tool calls waiting for elicitation answers at once
// (they return CANCELLED, or the session is gone), with 30 clients that
// never answer; Close takes no time on the fake clock.
func TestServerCloseEndsUnansweredElicitations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 30 sessions of one consumer wait at once: above the default per-consumer share.
		reg, a, _ := newAppWith(t, &surface.Options{Limits: surface.Limits{MaxPendingConfirmationsPerConsumer: 30}})
		srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "agent"}, &mcpsurface.Options{Elicit: true})
		if err != nil {
			t.Fatal(err)
		}
		const clients = 30
		asked, release := make(chan struct{}, clients), make(chan struct{})
		defer close(release)
		var calls []<-chan outcome
		for i := range clients {
			cs := connect(t, srv, v2025, ignoring(asked, release))
			calls = append(calls, callAsync(cs, "view_devices__table__wipe", map[string]any{"ids": []string{string(rune('a' + i))}}))
		}
		for range clients {
			<-asked
		}
		synctest.Wait()
		start := time.Now()
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close took %v", d)
		}
		for _, ch := range calls {
			o := <-ch
			if o.err == nil {
				requireCode(t, decode(t, o.res), surface.CodeCancelled)
			}
		}
		if a.wipes.Load() != 0 {
			t.Fatal("executed")
		}
	})
}

// Over Streamable HTTP, HTTPHandler.Close and a client's DELETE of another
// session end the tool calls waiting for elicitation answers at once; the
// other users' sessions are unaffected by the DELETE.
func TestHTTPCloseAndDeleteEndUnansweredElicitations(t *testing.T) {
	for _, how := range []string{"HTTPHandler.Close", "DELETE"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				users := twoUsers(t)
				f := &httpFixture{sessions: users}
				f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{Options: mcpsurface.Options{Elicit: true}})
				p := servePipe(f.h)
				defer p.stop()
				defer f.h.Close()
				asked, release := make(chan struct{}, 1), make(chan struct{})
				alice := connectPipe(t, p, "tok-alice", v2025, ignoring(asked, release))
				bob := connectPipe(t, p, "tok-bob", v2025, nil)
				defer bob.Close()
				done := callAsync(alice, "view_devices__table__wipe", map[string]any{"ids": []string{"d1"}})
				<-asked
				synctest.Wait()

				start := time.Now()
				switch how {
				case "HTTPHandler.Close":
					if err := f.h.Close(); err != nil {
						t.Fatal(err)
					}
				case "DELETE": // as a raw request: the SDK client's Close waits for its own unanswered handler first
					req, _ := http.NewRequest(http.MethodDelete, "http://pipe/mcp", nil)
					req.Header.Set("Authorization", "Bearer tok-alice")
					req.Header.Set("Mcp-Session-Id", alice.ID())
					resp, err := p.client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusNoContent {
						t.Fatalf("DELETE: %d", resp.StatusCode)
					}
				}
				if d := time.Since(start); d != 0 {
					t.Fatalf("%s took %v", how, d)
				}
				if o := <-done; o.err == nil {
					requireCode(t, decode(t, o.res), surface.CodeCancelled)
				}
				if users["tok-alice"].app.wipes.Load() != 0 {
					t.Fatal("executed")
				}
				if how == "DELETE" {
					listTools(t, bob)
					requireOK(t, callTool(t, bob, "domain_devices__list", nil, nil))
				}
				close(release)
				_ = alice.Close()
			})
		})
	}
}

// The expiry bounds only the wait for the answer: a call approved just
// before the confirmation expires runs to its end (here past the expiry)
// and succeeds, once.
func TestElicitationApprovedBeforeExpiryRunsPastIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Minute
		reg := surfacetest.NewRegistry(t, &surface.Options{Limits: surface.Limits{ConfirmationTTL: ttl, ActionTimeout: 5 * time.Minute}})
		var runs atomic.Int64
		surfacetest.MustRegister(t, reg, surface.Component{Type: "vault", Description: "Vault",
			Actions: map[string]surface.Capability{
				"purge": surface.Action(surface.ActionDef[surface.None, surface.None]{
					Description: "Purge the vault", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
					Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
						time.Sleep(ttl / 2) // still running when the confirmation would have expired
						runs.Add(1)
						return surface.None{}, nil
					},
				}),
			}})
		srv := newServer(t, reg, &mcpsurface.Options{Elicit: true})
		var asked atomic.Int64
		cs := connect(t, srv, v2025, answering("accept", true, &asked, func(*mcp.ElicitRequest) {
			time.Sleep(ttl - time.Second) // the user takes their time
		}))
		start := time.Now()
		requireOK(t, callTool(t, cs, "view_vault__purge", nil, nil))
		if runs.Load() != 1 || asked.Load() != 1 || time.Since(start) != ttl-time.Second+ttl/2 {
			t.Fatalf("runs %d, asked %d, after %v", runs.Load(), asked.Load(), time.Since(start))
		}
	})
}
