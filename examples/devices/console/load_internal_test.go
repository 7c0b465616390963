package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loadEnv asks for TestLoadReadState, which runs for tens of seconds:
// plain go test skips it.
const loadEnv = "AGENTSURFACE_LOAD"

// TestLoadReadState is the load harness: N browser sessions, each with
// its page's event stream open and reading every patch, and N MCP
// sessions, one per browser session with its token, calling readState
// back to back for a while. It runs three servers under the same load and
// client, one after the other, and logs each one's throughput, latency
// percentiles and CPU time per call (of this whole process, server and
// clients: less sensitive than wall time to other work on the machine):
//
//   - console: the devices console, readState reading the database;
//   - memory: the same console with readState answering a fixed table
//     from memory, the bound of what the console's own work allows;
//   - bare: mcpsurface alone, N registries with one no-op observation
//     and no pages;
//   - go-sdk: the go-sdk alone, one server with one no-op tool of the
//     same name, the floor of any MCP server in Go on this machine.
//
// It runs only with AGENTSURFACE_LOAD=1; AGENTSURFACE_LOAD_SESSIONS
// (default 100) and AGENTSURFACE_LOAD_DURATION (default 10s) size it, and
// AGENTSURFACE_LOAD_PROFILE=dir writes a CPU profile of each run there.
// It asserts that every call succeeded and that every page saw the
// activity its agent caused; the figures are for people to compare.
func TestLoadReadState(t *testing.T) {
	if os.Getenv(loadEnv) != "1" {
		t.Skip("the load harness runs for tens of seconds; run it with " + loadEnv + "=1 go test -run TestLoadReadState ./examples/devices/console/")
	}
	n := 100
	if v, err := strconv.Atoi(os.Getenv(loadEnv + "_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	dur := 10 * time.Second
	if v, err := time.ParseDuration(os.Getenv(loadEnv + "_DURATION")); err == nil && v > 0 {
		dur = v
	}
	only := os.Getenv(loadEnv + "_ONLY")
	for _, variant := range []string{"console", "memory", "bare", "go-sdk"} {
		if only != "" && only != variant {
			continue
		}
		t.Run(variant, func(t *testing.T) {
			var callers []func(context.Context) error
			var pages []*loadPage
			switch variant {
			case "bare":
				callers = bareServer(t, n)
			case "go-sdk":
				callers = goSDKServer(t, n)
			default:
				app := newTestApp(t)
				if variant == "memory" {
					fixed := fixedTable(t, app)
					app.readState = func(context.Context, *Session) (TableState, error) { return fixed, nil }
				}
				srv := httptest.NewServer(app)
				t.Cleanup(srv.Close)
				t.Cleanup(func() { _ = app.Close() }) // ends the streams before the server closes
				for range n {
					p := openLoadPage(t, srv)
					pages = append(pages, p)
					m, err := agent.Dial(context.Background(), srv.URL+"/mcp", &agent.DialOptions{Token: p.session(t, app).Token(), HTTPClient: srv.Client()})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = m.Close() })
					callers = append(callers, readStateCaller(m))
				}
			}
			prof := os.Getenv(loadEnv + "_PROFILE")
			if prof != "" {
				f, err := os.Create(filepath.Join(prof, "cpu-"+variant+".pprof"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					t.Fatal(err)
				}
				runtime.SetBlockProfileRate(int(time.Millisecond))
				runtime.SetMutexProfileFraction(10)
			}
			r := runLoad(t, callers, dur)
			if prof != "" {
				pprof.StopCPUProfile()
				runtime.SetBlockProfileRate(0)
				runtime.SetMutexProfileFraction(0)
				for _, name := range []string{"block", "mutex"} {
					f, err := os.Create(filepath.Join(prof, name+"-"+variant+".pprof"))
					if err != nil {
						t.Fatal(err)
					}
					_ = pprof.Lookup(name).WriteTo(f, 0)
					f.Close()
				}
			}
			t.Logf("%-7s %d sessions, %s: %6.0f calls/s  p50 %6.1f ms  p99 %6.1f ms  cpu %5.0f µs/call  (%d calls)",
				variant, n, dur, r.rate, r.p50, r.p99, r.cpuPerCall, r.calls)
			seen := 0
			for _, p := range pages {
				seen += p.patches()
			}
			t.Logf("the pages saw %d patches", seen)
		})
	}
}

// loadResult is one run's figures.
type loadResult struct {
	calls              int
	rate, p50, p99     float64 // calls/s, ms
	cpuPerCall         float64 // µs
	elapsed, cpuPassed time.Duration
}

// runLoad calls every caller back to back for d, all at once.
func runLoad(t *testing.T, callers []func(context.Context) error, d time.Duration) loadResult {
	t.Helper()
	lat := make([][]time.Duration, len(callers))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	cpu0, start := processCPU(), time.Now()
	for i, call := range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				err := call(context.Background()) // not ctx: a call in flight at the end completes
				if err != nil {
					t.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	all := slices.Concat(lat...)
	if len(all) == 0 {
		t.Fatal("no call completed")
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e6 }
	return loadResult{calls: len(all), rate: float64(len(all)) / elapsed.Seconds(), p50: pct(0.5), p99: pct(0.99),
		cpuPerCall: float64(cpu.Microseconds()) / float64(len(all)), elapsed: elapsed, cpuPassed: cpu}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readStateCaller calls the table's readState through m's session.
func readStateCaller(m *agent.MCP) func(context.Context) error {
	cs := m.Session()
	return func(ctx context.Context) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "view_devices__table__readState", Arguments: json.RawMessage(`{}`)})
		if err == nil && res.IsError {
			err = fmt.Errorf("readState: an error result: %+v", res.StructuredContent)
		}
		return err
	}
}

// fixedTable is what readState answers for a fresh session of app.
func fixedTable(t *testing.T, app *App) TableState {
	s, err := app.NewSession(SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.tableState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// loadPage is a browser tab: a cookie jar, the page loaded, its event
// stream open and read to the end.
type loadPage struct {
	client *http.Client
	srvURL string
	mu     sync.Mutex
	n      int
}

func openLoadPage(t *testing.T, srv *httptest.Server) *loadPage {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := *srv.Client()
	c.Jar = jar
	p := &loadPage{client: &c, srvURL: srv.URL}
	res, err := p.client.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s", res.Status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/agentsurface/events?f=header,table,activity,agentsurface-approvals,detail,agent,surface", nil)
	res, err = p.client.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("events: %v %v", err, res)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if sc.Text() == "event: patch" {
				p.mu.Lock()
				p.n++
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return p
}

func (p *loadPage) patches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// session returns the session of the page, by the public id it shows.
func (p *loadPage) session(t *testing.T, app *App) *Session {
	t.Helper()
	res, err := p.client.Get(p.srvURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	_, rest, _ := strings.Cut(string(page), "session <code>")
	id, _, _ := strings.Cut(rest, "<")
	s := app.Session(id)
	if s == nil {
		t.Fatalf("no session %q for the page", id)
	}
	return s
}

// goSDKServer serves one go-sdk server with one no-op tool named as the
// console's readState over Streamable HTTP, and returns n callers, each
// its own MCP session with the same client as the others.
func goSDKServer(t *testing.T, n int) []func(context.Context) error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-sdk", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "view_devices__table__readState", Description: "Does nothing.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{}`}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	callers := make([]func(context.Context) error, 0, n)
	for range n {
		m, err := agent.Dial(context.Background(), hs.URL, &agent.DialOptions{Token: "unused", HTTPClient: hs.Client()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		callers = append(callers, readStateCaller(m))
	}
	runtime.GC()
	return callers
}

// bareServer serves n registries with mcpsurface alone, each with one
// no-op observation named as the console's readState, and returns a
// caller per registry.
func bareServer(t *testing.T, n int) []func(context.Context) error {
	tokens := map[string]*surface.Registry{}
	for i := range n {
		reg := surface.New(nil)
		t.Cleanup(func() { _ = reg.Close() })
		_, err := reg.Register(surface.Component{Type: "devices.table", InstanceID: "main", Description: "No-op",
			Observations: map[string]surface.Capability{"readState": surface.Observation(surface.ObservationDef[struct{}]{
				Description: "Does nothing.",
				Read:        func(context.Context, *surface.Call) (struct{}, error) { return struct{}{}, nil },
			})}})
		if err != nil {
			t.Fatal(err)
		}
		tokens[fmt.Sprint("tok-", i)] = reg
	}
	h := mcpsurface.NewHTTPHandler(func(r *http.Request) (*surface.Registry, surface.Consumer, error) {
		reg := tokens[r.Header.Get("Authorization")[len("Bearer "):]]
		if reg == nil {
			return nil, surface.Consumer{}, errors.New("no session for this token")
		}
		return reg, MCPConsumer, nil
	}, nil)
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	callers := make([]func(context.Context) error, 0, n)
	for i := range n {
		m, err := agent.Dial(context.Background(), srv.URL, &agent.DialOptions{Token: fmt.Sprint("tok-", i), HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		callers = append(callers, readStateCaller(m))
	}
	runtime.GC()
	return callers
}
