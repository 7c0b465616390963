package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// pipeListener is a net.Listener of in-memory connections (net.Pipe), so
// that a real http.Server runs inside a synctest bubble, its deadlines on
// the bubble's clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080} }

// dial connects a client end.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// closedWithin reads from c until it is closed (or answers), and reports
// whether that happened by the end of the bubble's wait d.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, c)
	}()
	time.Sleep(d)
	synctest.Wait()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// The demo's server bounds how long a client may take to send its
// headers (slowloris) and its body, whatever the route; a request that
// has arrived may take long: an event stream stays open, and a WebMCP
// call waits minutes for the user's approval, past the read timeout.
func TestServerTimeouts(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store, err := domain.Open(ctx, filepath.Join(dir, "d.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if err := store.Seed(ctx); err != nil {
			t.Fatal(err)
		}
		app, err := console.New(console.Options{Store: store, Host: webhost.Options{Heartbeat: time.Hour, IdleTimeout: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		ln := newPipeListener()
		srv := newServer(app, slog.New(slog.DiscardHandler))
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() {
			_ = app.Close()
			_ = srv.Close()
			<-served
		}()

		// Headers that never end: the connection closes after
		// ReadHeaderTimeout, not before.
		c, _ := ln.dial(ctx, "", "")
		go func() { _, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") }()
		if closedWithin(t, c, srv.ReadHeaderTimeout-time.Second) {
			t.Fatal("closed before ReadHeaderTimeout")
		}
		if !closedWithin(t, c, 2*time.Second) {
			t.Fatal("a request whose headers never end holds its connection")
		}

		// A session, and a browser for it.
		s, err := app.NewSession(console.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		jar, _ := cookiejar.New(nil)
		hc := &http.Client{Jar: jar, Transport: &http.Transport{DialContext: ln.dial}}
		res, err := hc.Get("http://127.0.0.1:8080" + s.JoinPath())
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("join: %v %v", err, res)
		}
		res.Body.Close()
		var cookie string
		for _, ck := range res.Request.Cookies() {
			cookie = ck.String()
		}

		// A body that never ends: refused after ReadTimeout.
		c, _ = ln.dial(ctx, "", "")
		go func() {
			_, _ = io.WriteString(c, "POST /ui/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: "+cookie+
				"\r\nSec-Fetch-Site: same-origin\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nstatus=off")
		}()
		if closedWithin(t, c, srv.ReadTimeout-time.Second) {
			t.Fatal("closed before ReadTimeout")
		}
		if !closedWithin(t, c, 2*time.Second) {
			t.Fatal("a body that never ends holds its connection")
		}

		// An embedder's server without timeouts: the console's own
		// ReadTimeout bounds the body.
		bare := newPipeListener()
		bareSrv := &http.Server{Handler: app}
		go func() { _ = bareSrv.Serve(bare) }()
		defer bareSrv.Close()
		c, _ = bare.dial(ctx, "", "")
		go func() {
			_, _ = io.WriteString(c, "POST /ui/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: "+cookie+
				"\r\nSec-Fetch-Site: same-origin\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nstatus=off")
		}()
		if closedWithin(t, c, 29*time.Second) {
			t.Fatal("closed before the console's ReadTimeout (30s)")
		}
		if !closedWithin(t, c, 2*time.Second) {
			t.Fatal("without server timeouts, a body that never ends holds its connection")
		}

		// The page's event stream outlives the read timeout.
		sctx, closeTab := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, "http://127.0.0.1:8080"+consoleEvents, nil)
		res, err = hc.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("events: %v %v", err, res)
		}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			_, _ = io.Copy(io.Discard, res.Body)
		}()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("the event stream ended")
		default:
		}

		// A WebMCP call that waits 3 minutes for the approval.
		if err := postForm(hc, "/ui/toggle", "id=d4"); err != nil {
			t.Fatal(err)
		}
		res, err = hc.Get("http://127.0.0.1:8080/agentsurface/webmcp/tools")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			SurfaceVersion string `json:"surfaceVersion"`
		}
		_ = json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
		answer := make(chan surface.Result, 1)
		go func() {
			body := `{"name":"domain_devices__disable","surfaceVersion":"` + list.SurfaceVersion + `","input":{"reason":"slow approval"}}`
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/agentsurface/webmcp/call", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			res, err := hc.Do(req)
			var r surface.Result
			if err == nil {
				_ = json.NewDecoder(res.Body).Decode(&r)
				res.Body.Close()
			}
			answer <- r
		}()
		synctest.Wait()
		pending := s.Pending()
		if len(pending) != 1 {
			t.Fatalf("pending %v", pending)
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if _, ok := s.Decide(pending[0].ConfirmationID, true, "olivia (test)"); !ok {
			t.Fatal("decide")
		}
		if r := <-answer; r.Status != surface.StatusOK || string(r.Output) != `{"disabled":1}` {
			t.Fatalf("the call that waited: %+v", r)
		}
		closeTab()
		<-ended
	})
}

// postForm posts a form as the page's script does.
func postForm(hc *http.Client, path, form string) error {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080"+path, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("X-Agentsurface", "1")
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		return errors.New(path + ": " + res.Status)
	}
	return nil
}
