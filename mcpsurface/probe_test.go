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

// MaxSessions counts the sessions a consumer has open, not the
// requests that open none: the SDK client's server/discover probe (sent
// before initialize, without a session id) takes no slot and leaves no
// session behind. MaxSessions clients of one consumer connecting at once
// all succeed; one more is refused at initialize, after its probe was
// answered.
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
				var wg sync.WaitGroup
				errs := make(chan error, limit)
				for range limit {
					wg.Go(func() {
						cs, err := connectRecorded(t, "tok-alice", rec)
						if err == nil {
							_, err = cs.ListTools(bg, nil)
						}
						if err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				synctest.Wait() // the handlers of the probes have returned
				close(errs)
				for err := range errs {
					t.Errorf("a client within MaxSessions failed: %v", err)
				}
				probes, inits := 0, 0
				for _, x := range rec.exchanges() {
					switch x.method {
					case "server/discover":
						probes++
					case "initialize":
						inits++
					}
				}
				if probes != limit || inits != limit {
					t.Fatalf("the clients sent %v: want %d probes and %d initializes", rec.exchanges(), limit, limit)
				}
				if n := mcpsurface.OpenSessions(f.h); n != limit {
					t.Fatalf("%d sessions open, want %d", n, limit)
				}

				// At the limit: the probe is answered, the initialize refused,
				// and nothing is left open.
				over := &recorder{next: p.tr}
				if _, err := connectRecorded(t, "tok-alice", over); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
					t.Fatalf("one session beyond MaxSessions: %v", err)
				}
				if got, want := fmt.Sprint(over.exchanges()), fmt.Sprint([]exchange{{"server/discover", 200}, {"initialize", 429}}); got != want {
					t.Fatalf("beyond the limit the client got %s, want %s", got, want)
				}
				synctest.Wait()
				if n := mcpsurface.OpenSessions(f.h); n != limit {
					t.Fatalf("%d sessions open after the refused client, want %d", n, limit)
				}
			})
		})
	}
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
		alice.open(t) // the one slot is taken
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
