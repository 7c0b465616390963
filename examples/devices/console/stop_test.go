package console_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/chat"
	"github.com/agentsurface/agentsurface/examples/devices/console"
)

// A model endpoint that hangs: the page's Stop (a form post) ends the
// run at once, and the console says so; the console is free for the next
// prompt.
func TestStopHangingModel(t *testing.T) {
	asked := make(chan struct{}, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client go
		asked <- struct{}{}
		select { // never answers
		case <-r.Context().Done():
		case <-time.After(8 * time.Second):
			t.Error("the request was not cancelled")
		}
	}))
	t.Cleanup(api.Close) // after the App's cleanup: its run ends the hanging request
	d := newDemo(t, console.Options{Agent: chat.New(api.URL+"/v1/", "m", ""), AgentName: "m"})
	b := d.browser(t)
	b.get("/")
	tab := b.events()
	if code, msg := b.post("/ui/ask", map[string][]string{"prompt": {"hello"}}); code != http.StatusNoContent {
		t.Fatalf("ask: %d %s", code, msg)
	}
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the model was not asked")
	}
	tab.await(t, "agent", func(h string) bool { return contains(h, `data-busy="true"`) && contains(h, "Working…") })
	if code, msg := b.post("/ui/stop", nil); code != http.StatusNoContent {
		t.Fatalf("stop: %d %s", code, msg)
	}
	tab.await(t, "agent", func(h string) bool {
		return contains(h, `data-busy="false"`) && contains(h, `<li class="bad">Stopped.</li>`)
	})
	if code, _ := b.post("/ui/stop", nil); code != http.StatusNoContent { // nothing to stop: fine
		t.Fatalf("stop again: %d", code)
	}
}

// Stop while the page's agent waits for an approval: the run ends with
// ErrStopped, the approval card goes (expired), and nothing executes.
func TestStopWhileWaitingForApproval(t *testing.T) {
	d := newDemo(t, console.Options{})
	s := d.session(t)
	done, err := s.Ask("")
	if err != nil {
		t.Fatal(err)
	}
	awaitPending(t, s)
	if !s.StopAgent() {
		t.Fatal("nothing was stopped")
	}
	if err := <-done; !errors.Is(err, console.ErrStopped) {
		t.Fatalf("the run ended with %v", err)
	}
	if len(s.Pending()) != 0 {
		t.Fatalf("still pending: %+v", s.Pending())
	}
	if st := d.status(t); st["d9"] != "offline" || st["d10"] != "offline" {
		t.Fatalf("executed: %v", st)
	}
	if s.StopAgent() {
		t.Fatal("stopped a run twice")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
