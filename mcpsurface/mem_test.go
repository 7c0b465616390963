package mcpsurface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// memStats is the live heap and goroutine stacks after collections.
type memStats struct{ heap, stack uint64 }

func readMem() memStats {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return memStats{heap: m.HeapAlloc, stack: m.StackInuse}
}

// perUser is the growth from a to b per user, in bytes.
func perUser(a, b uint64, users int) float64 { return (float64(b) - float64(a)) / float64(users) }

// idleUsers are the users of BenchmarkIdleUserMemory.
const idleUsers = 1000

// openIdle opens one stateful session for each token and lists its tools,
// as a client that connected and went idle does.
func openIdle(b *testing.B, url string, tokens []string) (sids []string) {
	for _, tok := range tokens {
		c := rawClient{http.DefaultClient, url, tok}
		sid := c.open(b)
		if c.listTools(b, sid) != http.StatusOK {
			b.Fatal("tools/list")
		}
		sids = append(sids, sid)
	}
	http.DefaultClient.CloseIdleConnections()
	return sids
}

// What an idle MCP user costs, side by side: 1,000 users, each with one
// stateful session (initialized, tools listed, then idle) over
// Streamable HTTP on loopback, through an HTTPHandler (one registry with
// the devices table per user) and through a bare go-sdk server per user
// with the same five tools (raw AddTool, same schemas). It reports, per
// user, the registry's heap (the application's state, which exists
// without MCP), the MCP heap (servers and session), the goroutine stacks,
// and what a deleted session leaves behind. Run it with
//
//	go test ./mcpsurface -run '^$' -bench IdleUserMemory -benchtime 1x
func BenchmarkIdleUserMemory(b *testing.B) {
	b.Run("server=agentsurface", func(b *testing.B) {
		for b.Loop() {
			base := readMem()
			regs := map[string]*surface.Registry{}
			tokens := make([]string, idleUsers)
			for i := range tokens {
				tokens[i] = fmt.Sprint("tok-", i)
				reg := surface.New(nil)
				surfacetest.MustRegister(b, reg, (&app{}).table("main"))
				regs[tokens[i]] = reg
			}
			withRegs := readMem()
			h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
				return regs[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")], surface.Consumer{ID: "agent"}, nil
			}, nil)
			hs := httptest.NewServer(h)
			for _, tok := range tokens { // a ping creates the user's Server, and no session
				c := rawClient{http.DefaultClient, hs.URL, tok}
				if status, _, _, err := c.post(bg, "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); err != nil || status != http.StatusOK {
					b.Fatalf("ping: %d %v", status, err)
				}
			}
			http.DefaultClient.CloseIdleConnections()
			withServers := readMem()
			writeHeap("MEMPROF_BASE")
			sids := openIdle(b, hs.URL, tokens)
			withSessions := readMem()
			writeHeap("MEMPROF")
			deleteAll(b, hs.URL, tokens, sids)
			afterDelete := readMem()
			writeHeap("MEMPROF_AFTER")
			b.ReportMetric(perUser(base.heap, withRegs.heap, idleUsers), "registry-B/user")
			b.ReportMetric(perUser(withRegs.heap, withServers.heap, idleUsers), "server-B/user")
			b.ReportMetric(perUser(withServers.heap, withSessions.heap, idleUsers), "session-B/user")
			b.ReportMetric(perUser(withRegs.heap, withSessions.heap, idleUsers), "mcp-B/user")
			b.ReportMetric(perUser(base.stack, withSessions.stack, idleUsers), "stack-B/user")
			b.ReportMetric(perUser(withRegs.heap, withSessions.heap, idleUsers)+perUser(base.stack, withSessions.stack, idleUsers), "total-B/user")
			b.ReportMetric(perUser(withServers.heap, afterDelete.heap, idleUsers), "left-after-delete-B/user")
			_ = h.Close()
			hs.Close()
			for _, reg := range regs {
				_ = reg.Close()
			}
		}
	})
	b.Run("server=bare", func(b *testing.B) {
		for b.Loop() {
			base := readMem()
			reg := surface.New(nil) // only to read the same tool definitions
			surfacetest.MustRegister(b, reg, (&app{}).table("main"))
			ts, _ := surface.NewToolset(reg, surface.ToolsetOptions{Topology: surface.TopologyRemote})
			defs := ts.Tools()
			_ = ts.Close()
			_ = reg.Close()
			servers := map[string]*mcp.Server{}
			tokens := make([]string, idleUsers)
			for i := range tokens {
				tokens[i] = fmt.Sprint("tok-", i)
				s := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
				for _, d := range defs {
					s.AddTool(&mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: json.RawMessage(d.InputSchema)},
						func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
							return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
						})
				}
				servers[tokens[i]] = s
			}
			withServers := readMem()
			h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
				return servers[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
			}, nil)
			hs := httptest.NewServer(h)
			sids := openIdle(b, hs.URL, tokens)
			withSessions := readMem()
			deleteAll(b, hs.URL, tokens, sids)
			afterDelete := readMem()
			b.ReportMetric(perUser(withServers.heap, afterDelete.heap, idleUsers), "left-after-delete-B/user")
			b.ReportMetric(perUser(base.heap, withServers.heap, idleUsers), "server-B/user")
			b.ReportMetric(perUser(withServers.heap, withSessions.heap, idleUsers), "session-B/user")
			b.ReportMetric(perUser(base.heap, withSessions.heap, idleUsers), "mcp-B/user")
			b.ReportMetric(perUser(base.stack, withSessions.stack, idleUsers), "stack-B/user")
			b.ReportMetric(perUser(base.heap, withSessions.heap, idleUsers)+perUser(base.stack, withSessions.stack, idleUsers), "total-B/user")
			for _, s := range servers {
				for ss := range s.Sessions() {
					_ = ss.Close()
				}
			}
			hs.Close()
		}
	})
}

// deleteAll ends every session h holds with DELETE, as clients that close
// properly do.
func deleteAll(b *testing.B, url string, tokens, sids []string) {
	for i, sid := range sids {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set("Authorization", "Bearer "+tokens[i])
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			b.Fatalf("DELETE: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
}

// writeHeap writes a heap profile to the file named by the environment
// variable env, if set (to study where the bytes go).
func writeHeap(env string) {
	if f := os.Getenv(env); f != "" {
		out, _ := os.Create(f)
		_ = pprof.WriteHeapProfile(out)
		out.Close()
	}
}

// collected reports whether every object of ws has been freed.
func collected[T any](ws []weak.Pointer[T]) int {
	for range 5 {
		runtime.GC()
	}
	n := 0
	for _, w := range ws {
		if w.Value() != nil {
			n++
		}
	}
	return n
}

// What a deleted session leaves behind is freed: after DELETE (and,
// for sessions that timed out, after the next sweep) nothing of this
// package still refers to the SDK's session, which the collector
// reclaims with everything it held, while the user's Server stays cached.
// (The DELETE case runs without a session timeout: the SDK's stopped
// timer of a session keeps it reachable until the runtime clears it, at
// the latest when it would have fired; a bare go-sdk server is the same.)
func TestEndedSessionsAreFreed(t *testing.T) {
	for _, how := range []string{"DELETE", "timeout"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &httpFixture{sessions: twoUsers(t)}
				timeout := time.Minute
				if how == "DELETE" {
					timeout = -1
				}
				f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{SessionTimeout: timeout, IdleTimeout: time.Hour})
				p := servePipe(f.h)
				defer p.stop()
				defer f.h.Close()
				alice := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
				var sids []string
				for range 5 {
					sid := alice.open(t)
					if alice.listTools(t, sid) != http.StatusOK { // the session's catalog is recorded
						t.Fatal("tools/list")
					}
					requireStatus(t, alice, sid)
					sids = append(sids, sid)
				}
				var ws []weak.Pointer[mcp.ServerSession]
				for _, ss := range mcpsurface.ServerSessions(f.h) {
					ws = append(ws, weak.Make(ss))
				}
				if len(ws) != 5 {
					t.Fatalf("%d sessions", len(ws))
				}
				switch how {
				case "DELETE":
					for _, sid := range sids {
						req, _ := http.NewRequest(http.MethodDelete, "http://pipe/mcp", nil)
						req.Header.Set("Authorization", "Bearer tok-alice")
						req.Header.Set("Mcp-Session-Id", sid)
						resp, err := p.client.Do(req)
						if err != nil || resp.StatusCode != http.StatusNoContent {
							t.Fatalf("DELETE: %v %v", resp, err)
						}
						resp.Body.Close()
					}
				case "timeout":
					time.Sleep(time.Hour / 4) // the sessions' timeout, then a sweep
				}
				synctest.Wait()
				p.tr.CloseIdleConnections()
				synctest.Wait()
				if n := mcpsurface.CachedServers(f.h); n != 1 {
					t.Fatalf("%d servers cached, want Alice's", n)
				}
				if n, l := mcpsurface.OpenSessions(f.h), mcpsurface.ListedSessions(f.h); n != 0 || l != 0 {
					t.Fatalf("%d sessions open, %d catalogs of sessions kept", n, l)
				}
				if n := collected(ws); n != 0 {
					t.Fatalf("%d of 5 ended sessions are still reachable", n)
				}
			})
		})
	}
}

// requireStatus calls a tool on session sid, so that the session has
// served a call too.
func requireStatus(t *testing.T, c rawClient, sid string) {
	t.Helper()
	if status, resp, err := c.call(bg, sid, 3, "view_devices__table__readState", `{}`); err != nil || status != http.StatusOK || resp == nil || resp.Error != nil {
		t.Fatalf("call: %d %v %+v", status, err, resp)
	}
}

// The Servers of one handler share tool definitions: users of one
// application are shown the same tools, held once. A definition that
// changes for one user (its availability) is that user's own; one no
// server shows is dropped.
func TestToolDefinitionsShared(t *testing.T) {
	users := twoUsers(t)
	bob := users["tok-bob"]
	surfacetest.MustRegister(t, bob.reg, bob.app.table("main")) // Bob has Alice's table too
	f := newHTTP(t, nil, users)
	alice := f.mustClient(t, "tok-alice", v2025, nil)
	ab := f.mustClient(t, "tok-bob", v2025, nil)
	listTools(t, alice)
	listTools(t, ab)
	if n := mcpsurface.SharedToolDefs(f.h); n != 9 { // 5 table tools, shared, and Bob's 4 panel tools
		t.Fatalf("%d definitions held, want 9", n)
	}
	a := users["tok-alice"]
	h := surfacetest.MustRegister(t, a.reg, surface.Component{Type: "gate", Description: "Gate",
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads", 1)}})
	if n := mcpsurface.SharedToolDefs(f.h); n != 10 {
		t.Fatalf("%d definitions held, want 10", n)
	}
	h.Unregister()
	if n := mcpsurface.SharedToolDefs(f.h); n != 9 {
		t.Fatalf("%d definitions held after the unmount, want 9", n)
	}
	// The clients leave first: one still connected would reconnect after
	// Forget, and get a new server.
	_ = alice.Close()
	_ = ab.Close()
	f.h.Forget(a.reg) // Bob still shows the table
	if n := mcpsurface.SharedToolDefs(f.h); n != 9 {
		t.Fatalf("%d definitions held after Alice's server went, want Bob's 9", n)
	}
	f.h.Forget(bob.reg)
	if n := mcpsurface.SharedToolDefs(f.h); n != 0 {
		t.Fatalf("%d definitions held with no server, want 0", n)
	}
}
