package mcpsurface_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// exchange is one POST a client sent without a session id, and the
// status it got.
type exchange struct {
	method string
	status int
}

// recorder records the session-less POSTs that pass through it.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var method string
	if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" && req.GetBody != nil {
		body, err := req.GetBody()
		if err == nil {
			b, _ := io.ReadAll(body)
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(b, &m)
			method = m.Method
		}
	}
	resp, err := r.next.RoundTrip(req)
	if method != "" && err == nil {
		r.mu.Lock()
		r.seen = append(r.seen, exchange{method, resp.StatusCode})
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.seen...)
}

// connectRecorded connects an SDK client at its default (latest)
// protocol version, which probes with server/discover before it
// initializes, recording what it sent without a session.
func connectRecorded(t *testing.T, token string, rec *recorder) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://pipe/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, rec}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe-client", Version: "1"}, nil).Connect(bg, tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// MaxSessions counts the stateful sessions a consumer has open, not the
// requests that open none: server/discover probes (with or without a
// protocol version), pings and whole 2026-07-28 clients take no slot and
// leave no session behind. MaxSessions 2025-11-25 clients of one consumer,
// each holding its stream open, all connect while as many 2026-07-28
// clients and probes come and go; with every session busy, one more
// initialize is refused while probes are still answered.
func TestHTTPProbeTakesNoSessionSlot(t *testing.T) {
	const limit = 4
	for round := range 5 { // the clients race differently each round
		t.Run(fmt.Sprint("round=", round), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &httpFixture{sessions: twoUsers(t)}
				f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{MaxSessions: limit})
				p := servePipe(f.h)
				defer p.stop()
				defer f.h.Close()
				rec := &recorder{next: p.tr}
				raw := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
				var wg sync.WaitGroup
				errs := make(chan error, 4*limit)
				for i := range limit {
					wg.Go(func() { // a stateful client: its standalone stream keeps it busy
						cs, err := connectVersion(t, "tok-alice", v2025, rec)
						if err == nil {
							_, err = cs.ListTools(bg, nil)
						}
						if err != nil {
							errs <- err
						}
					})
					wg.Go(func() { // a 2026-07-28 client: no session at all
						cs, err := connectVersion(t, "tok-alice", v2026, rec)
						if err == nil {
							_, err = cs.ListTools(bg, nil)
						}
						if err != nil {
							errs <- err
						}
					})
					wg.Go(func() { // probes
						for _, pr := range probes(i) {
							if status, sid, msg, err := raw.postVersion(bg, "", pr.version, pr.body); err != nil || status != http.StatusOK || sid != "" {
								errs <- fmt.Errorf("probe %s: %d %q %v %+v", pr.body, status, sid, err, msg)
							}
						}
					})
				}
				wg.Wait()
				synctest.Wait() // the handlers of the probes have returned
				close(errs)
				for err := range errs {
					t.Errorf("a client within MaxSessions failed: %v", err)
				}
				inits := 0
				for _, x := range rec.exchanges() {
					if x.method == "initialize" {
						inits++
					}
				}
				if inits != limit {
					t.Fatalf("the clients sent %v: want %d initializes", rec.exchanges(), limit)
				}
				if n := mcpsurface.OpenSessions(f.h); n != limit {
					t.Fatalf("%d sessions open, want %d", n, limit)
				}

				// At the limit, every session busy: probes are answered, the
				// initialize refused, and nothing is left open.
				for _, pr := range probes(0) {
					if status, _, _, err := raw.postVersion(bg, "", pr.version, pr.body); err != nil || status != http.StatusOK {
						t.Fatalf("probe at the limit: %d %v", status, err)
					}
				}
				if status, _, _, err := raw.post(bg, "", rawInit); err != nil || status != http.StatusTooManyRequests {
					t.Fatalf("one session beyond MaxSessions: %d %v", status, err)
				}
				synctest.Wait()
				if n := mcpsurface.OpenSessions(f.h); n != limit {
					t.Fatalf("%d sessions open after the refused client, want %d", n, limit)
				}
			})
		})
	}
}

// meta2026 is the _meta a 2026-07-28 request carries: the protocol
// version, the client's identity and capabilities.
const meta2026 = `{"io.modelcontextprotocol/protocolVersion":"` + v2026 + `","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// probe is a session-less request and its MCP-Protocol-Version header.
type probe struct{ version, body string }

// probes are the session-less requests of probe round i: server/discover
// at 2026-07-28 (as the go-sdk client sends it) and without a version
// (which older protocols answer "method not found"), and a ping.
func probes(i int) []probe {
	return []probe{
		{"", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"server/discover"}`, 100+i)},
		{v2026, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"server/discover","params":{"_meta":%s}}`, 200+i, meta2026)},
		{"", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 300+i)},
	}
}

// connectVersion connects an SDK client at a protocol version over the
// pipe network, recording what it sent without a session.
func connectVersion(t *testing.T, token, version string, rec *recorder) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://pipe/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, rec}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe-client", Version: "1"}, nil).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// A POST without a session id takes a slot unless its body is, in full,
// JSON-RPC requests none of which is initialize: a body too large to
// read ahead, malformed, or a batch with an initialize counts, and the
// method is read as the SDK reads it, so neither padding nor a second
// spelling of "method" slips an initialize past MaxSessions.
func TestHTTPSessionOpeningBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &httpFixture{sessions: twoUsers(t)}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{MaxSessions: 1})
		p := servePipe(f.h)
		defer p.stop()
		defer f.h.Close()
		alice := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
		sid := alice.open(t) // the one slot is taken, and busy:
		stop := alice.stream(t, sid)
		defer stop()
		padded := `{"jsonrpc":"2.0","id":1,"method":"initialize",` + `"x":"` + strings.Repeat(" ", 70<<10) + `",` + rawInit[len(`{"jsonrpc":"2.0","id":1,"method":"initialize",`):]
		for name, body := range map[string]string{
			"initialize":            rawInit,
			"padded initialize":     padded,
			"batch with initialize": `[` + rawInit + `]`,
			"malformed":             `{"jsonrpc":"2.0","id":1,"method":"initialize"`,
			// encoding/json would read "ping" (case-insensitive, last wins);
			// the SDK reads initialize.
			"initialize, then METHOD": rawInit[:len(rawInit)-1] + `,"METHOD":"ping"}`,
		} {
			status, sid, _, err := alice.post(bg, "", body)
			if err != nil || status != http.StatusTooManyRequests || sid != "" {
				t.Errorf("%s: %d %q %v, want 429", name, status, sid, err)
			}
		}
		// A ping without a session is no session either: it gets the SDK's
		// answer, not 429, and leaves nothing open.
		status, sid, _, err := alice.post(bg, "", `{"jsonrpc":"2.0","id":7,"method":"ping"}`)
		if err != nil || status == http.StatusTooManyRequests || sid != "" {
			t.Fatalf("ping: %d %q %v", status, sid, err)
		}
		synctest.Wait()
		if n := mcpsurface.OpenSessions(f.h); n != 1 {
			t.Fatalf("%d sessions open, want 1", n)
		}
	})
}
