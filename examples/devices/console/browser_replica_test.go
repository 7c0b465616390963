package console_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentsurface/agentsurface/internal/lbtest"
)

// A page in a real Chromium, behind a front proxy, whose replica stops:
// its event stream says the session ended, and the page's script loads
// the page again (after its backoff), which starts a fresh session on
// the replica the proxy now sends it to; the page is live again.
func TestBrowserPageReconnectsAfterReplicaStops(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	var target atomic.Pointer[url.URL]
	ua, _ := url.Parse(a.srv.URL)
	ub, _ := url.Parse(b.srv.URL)
	target.Store(ua)
	front := httptest.NewServer(lbtest.Buffered(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target.Load())
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}))
	t.Cleanup(front.Close)
	browser := headless(t)
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	const sessionOf = `(document.body.innerHTML.match(/session <code>(s_[^<]+)<\/code>/) || [])[1] || ''`
	if err := chromedp.Do(ctx, chromedp.Navigate(front.URL+"/"), chromedp.WaitReady(`body[data-live]`)); err != nil {
		t.Fatal(err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](sessionOf))
	if err != nil {
		t.Fatal(err)
	}
	if s := a.app.Sessions(); len(s) != 1 || s[0].ID() != first {
		t.Fatalf("the page's session %q is not a's (%d sessions)", first, len(s))
	}

	target.Store(ub)
	stopped := time.Now()
	a.stop()
	var now string
	for {
		// A page being reloaded has no body to evaluate in: try again.
		now, _ = chromedp.Run(ctx, chromedp.Evaluate[string](sessionOf))
		live, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body.dataset.live === 'true'`))
		if live && now != "" && now != first {
			break
		}
		if time.Since(stopped) > 15*time.Second {
			t.Fatalf("the page did not reconnect: session %q, live %v", now, live)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the page had a fresh session %v after its replica stopped", time.Since(stopped).Round(10*time.Millisecond))
	var ids []string
	for _, s := range b.app.Sessions() {
		ids = append(ids, s.ID())
	}
	if !slices.Contains(ids, now) {
		t.Fatalf("the page's new session %s is not b's (%v)", now, ids)
	}
}
