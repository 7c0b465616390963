package webhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// notified is one call of the notifier.
type notified struct {
	p    surface.PendingConfirmation
	link string
	s    *webhost.Session
}

// The notifier is told of every confirmation request, with its approve
// link, on a goroutine of its own, bounded: one that panics is
// recovered and logged, and the next request is notified; ones that hang
// (ignoring their context) delay no call and no page, hold their place
// until they return, so that a request beyond MaxConcurrent is not
// notified (logged, counted); Close waits for them a bounded time, then
// abandons them with a log line.
func TestNotifierBounded(t *testing.T) {
	var log logs
	calls := make(chan notified, 16)
	started := make(chan string, 16)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // the abandoned calls return, before goleak looks
	notify := func(ctx context.Context, s *webhost.Session, p surface.PendingConfirmation, link string) error {
		switch {
		case strings.Contains(string(p.Input), "panic"):
			panic("the notifier broke")
		case strings.Contains(string(p.Input), "hang"):
			started <- string(p.Input)
			<-release // ignores ctx
			return nil
		case strings.Contains(string(p.Input), "fail"):
			return errors.New("the chat is down")
		}
		calls <- notified{p, link, s}
		return nil
	}
	a := newArchiveApp(t, webhost.Options{Logger: log.logger(),
		Notifier: webhost.NotifierOptions{Notify: notify, Timeout: 200 * time.Millisecond, MaxConcurrent: 2}})
	s := a.archivable(t, "")

	ask(t, a, s, `{"ids":["panic"]}`)
	eventually(t, "the panic is logged", func() bool { return log.count("level=WARN", "the notifier failed", "panicked") == 1 })
	ask(t, a, s, `{"ids":["fail"]}`)
	eventually(t, "the failure is logged", func() bool { return log.count("level=WARN", "the notifier failed", "the chat is down") == 1 })

	p, cs := ask(t, a, s, `{"ids":["n1"]}`)
	var got notified
	select {
	case got = <-calls:
	case <-time.After(waitFor):
		t.Fatal("not notified")
	}
	if got.s != s || got.p.ConfirmationID != p.ConfirmationID || !strings.HasPrefix(got.link, a.srv.URL+a.h.ApprovePath(p.ConfirmationID)+"?link=") {
		t.Fatalf("notified %+v, want %s", got, p.ConfirmationID)
	}
	if code, page := a.browser(t).get(pathOf(t, got.link)); code != http.StatusOK || !strings.Contains(page, p.ConfirmationID) {
		t.Fatalf("the notified link: %d", code)
	}
	eventually(t, "no notification runs", func() bool { return a.h.Stats().Notifying == 0 })

	ask(t, a, s, `{"ids":["hang1"]}`)
	ask(t, a, s, `{"ids":["hang2"]}`)
	for range 2 {
		select {
		case <-started:
		case <-time.After(waitFor):
			t.Fatal("the hanging notifications did not start")
		}
	}
	ask(t, a, s, `{"ids":["n2"]}`) // the call returns at once, not notified
	eventually(t, "the request beyond the bound is dropped", func() bool { return a.h.Stats().NotifyDropped == 1 })
	if st := a.h.Stats(); st.Notifying != 2 || st.NotifyDropped != 1 || st.NotifyFailed != 2 {
		t.Fatalf("stats %+v", st)
	}
	if log.count("level=WARN", "not notified") != 1 {
		t.Fatalf("the dropped notification is not logged:\n%s", log.String())
	}
	// Neither a call nor a page waits for them.
	requireCode(t, callTool(t, cs, "view:notes.board.read", "", nil), "ok")
	if code, _ := a.browser(t).get("/"); code != http.StatusOK {
		t.Fatalf("a page: %d", code)
	}
	_ = a.h.Close() // waits Timeout at most
	if log.count("Close abandons notifier calls", "running=2") != 1 {
		t.Fatalf("the abandoned calls are not logged:\n%s", log.String())
	}
	unblock()
	eventually(t, "the abandoned calls return", func() bool { return a.h.Stats().Notifying == 0 })
}

// A notifier that respects its context ends at its Timeout, and at
// Close (which then waits for it).
func TestNotifierContextEnds(t *testing.T) {
	ended := make(chan error, 4)
	a := newArchiveApp(t, webhost.Options{Notifier: webhost.NotifierOptions{Timeout: time.Hour,
		Notify: func(ctx context.Context, _ *webhost.Session, _ surface.PendingConfirmation, _ string) error {
			<-ctx.Done()
			ended <- ctx.Err()
			return ctx.Err()
		}}})
	s := a.archivable(t, "")
	ask(t, a, s, `{"ids":["n1"]}`)
	eventually(t, "the notification runs", func() bool { return a.h.Stats().Notifying == 1 })
	_ = a.h.Close()
	if st := a.h.Stats(); st.Notifying != 0 {
		t.Fatalf("Close returned with %d notifications running", st.Notifying)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the context ended with %v", err)
	}
}

// slackPost is what the webhook receives.
type slackPost struct {
	Text   string `json:"text"`
	Blocks []struct {
		Type string `json:"type"`
		Text *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"text"`
		Elements []struct {
			Type string `json:"type"`
			Text struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"text"`
			URL   string `json:"url"`
			Style string `json:"style"`
		} `json:"elements"`
	} `json:"blocks"`
}

// The Slack-style webhook, end to end: the agent's call needs approval;
// the webhook receives a message (JSON text and blocks) with who asks,
// what, the summary escaped so that the agent's text makes no link or
// mention, and a button with the absolute approve link; the link opens
// the approve page in a browser that never saw the application, the
// click approves, and the agent's retry runs. A webhook that fails is
// logged and counted.
func TestSlackWebhookEndToEnd(t *testing.T) {
	posts := make(chan slackPost, 4)
	var failing bool
	var mu sync.Mutex
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fail := failing
		mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.URL.Path != "/hooks/T0/B0" || fail {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		var p slackPost
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		posts <- p
		_, _ = io.WriteString(w, "ok")
	}))
	defer chat.Close()
	var log logs
	a := newArchiveApp(t, webhost.Options{Logger: log.logger(), Notifier: webhost.NotifierOptions{Notify: webhost.SlackWebhook(chat.URL+"/hooks/T0/B0", chat.Client())}})
	s := a.archivable(t, "")
	args := `{"ids":["<https://evil.example|click me>","<!channel>"]}`
	p, cs := ask(t, a, s, args)
	var post slackPost
	select {
	case post = <-posts:
	case <-time.After(waitFor):
		t.Fatal("the webhook got nothing")
	}
	if len(post.Blocks) != 2 || len(post.Blocks[1].Elements) != 1 {
		t.Fatalf("the post %+v", post)
	}
	link := post.Blocks[1].Elements[0].URL
	if len(post.Blocks) != 2 || post.Blocks[0].Type != "section" || post.Blocks[0].Text == nil || post.Blocks[0].Text.Type != "mrkdwn" ||
		post.Blocks[1].Type != "actions" || len(post.Blocks[1].Elements) != 1 || post.Blocks[1].Elements[0].Type != "button" ||
		!strings.HasPrefix(link, a.srv.URL+"/agentsurface/approve/"+p.ConfirmationID+"?link=") {
		t.Fatalf("the post %+v (link %s)", post, link)
	}
	section := post.Blocks[0].Text.Text
	for _, want := range []string{"`mcp-bridge:agent`", "`view:notes.archive.archive`", "&lt;https://evil.example|click me&gt;", "&lt;!channel&gt;",
		p.ExpiresAt.UTC().Format("15:04:05") + " UTC"} {
		if !strings.Contains(section, want) {
			t.Errorf("the section lacks %q: %s", want, section)
		}
	}
	if strings.Contains(section, "<https://evil") || strings.Contains(section, "<!channel>") || strings.Contains(post.Text, "evil") ||
		!strings.Contains(post.Text, "<"+link+"|open the approve page>") {
		t.Fatalf("the agent's text reached the chat unescaped: %q / %q", section, post.Text)
	}

	// On the phone: the link, the page, the click.
	phone := a.browser(t)
	path := pathOf(t, post.Blocks[1].Elements[0].URL)
	if code, page := phone.get(path); code != http.StatusOK || !strings.Contains(page, "&lt;!channel&gt;") {
		t.Fatalf("the chat's link: %d %s", code, page)
	}
	if code, _ := phone.decideVia(path, url.Values{"decision": {"approve"}}); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	if ds := s.Decisions(); len(ds) != 1 || ds[0].Channel != surface.ChannelWebhook {
		t.Fatalf("decisions %+v", ds)
	}
	requireCode(t, retry(t, cs, "view:notes.archive.archive", args, p.ConfirmationID), "ok")
	if got := boardOf(s).archivedIDs(); len(got) != 1 {
		t.Fatalf("archived %v", got)
	}

	mu.Lock()
	failing = true
	mu.Unlock()
	ask(t, a, s, `{"ids":["n9"]}`)
	eventually(t, "the failed post is counted", func() bool { return a.h.Stats().NotifyFailed == 1 })
	if log.count("level=WARN", "the notifier failed", "400 Bad Request") != 1 || strings.Contains(log.String(), "/hooks/T0/B0") {
		t.Fatalf("the failure's log line:\n%s", log.String())
	}
}

// SlackWebhook refuses a link that is not absolute (Options.PublicURL
// unset) and posts nothing for a request decided already.
func TestSlackWebhookNeedsAbsoluteLinks(t *testing.T) {
	var n int
	var mu sync.Mutex
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
	}))
	defer chat.Close()
	notify := webhost.SlackWebhook(chat.URL, nil)
	p := surface.PendingConfirmation{ConfirmationID: "cnf_x", ExpiresAt: time.Now()}
	if err := notify(bg, nil, p, "/agentsurface/approve/cnf_x?link=a.b"); err == nil || !strings.Contains(err.Error(), "PublicURL") {
		t.Fatalf("a relative link: %v", err)
	}
	if err := notify(bg, nil, p, ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 0 {
		t.Fatalf("%d posts", n)
	}
}
