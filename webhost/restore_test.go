package webhost_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// A session made again in a later run from its Credentials (the hashes
// an application keeps in its database) answers to the credentials of
// the earlier run: the MCP bearer token an agent was configured with,
// the cookie of a page left open, the join link printed then, which sets
// that same cookie. It keeps its public id; its token and join link are
// unknown to the new run. A live session's credentials cannot be taken
// twice, and once it ends they reach nothing.
func TestSessionRestoredFromCredentials(t *testing.T) {
	first := newApp(t, webhost.Options{})
	s1 := first.session(t)
	token, join, cr := s1.Token(), s1.JoinPath(), s1.Credentials()
	if cr.ID != s1.ID() || cr.Token != sha256.Sum256([]byte(token)) || cr.Join != sha256.Sum256([]byte(strings.TrimPrefix(join, "/agentsurface/join/"))) {
		t.Fatalf("credentials %+v of a session with token %q and join path %q", cr, token, join)
	}
	tab := first.browser(t)
	if code, _ := tab.get(join); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	cookie := tab.cookie()
	if cr.Cookie != sha256.Sum256([]byte(cookie)) {
		t.Fatal("the credentials do not name the cookie the join link set")
	}
	_ = first.h.Close() // the first run ends

	second := newApp(t, webhost.Options{})
	s2, err := second.h.NewSession(webhost.SessionOptions{KeepShown: true, Credentials: &cr})
	if err != nil {
		t.Fatal(err)
	}
	if s2.ID() != s1.ID() || s2.Token() != "" || s2.JoinPath() != "" || s2.Credentials() != cr {
		t.Fatalf("restored: id %s token %q join %q credentials %+v", s2.ID(), s2.Token(), s2.JoinPath(), s2.Credentials())
	}
	// The agent's token of the first run.
	cs := second.dial(t, token, stateful)
	requireCode(t, callTool(t, cs, "view:notes.board.add", `{"text":"after the restart"}`, nil), "ok")
	if got := boardOf(s2).list(); !slices.Equal(got, []string{"after the restart"}) {
		t.Fatalf("the token reached notes %v", got)
	}
	// The page left open: its cookie (the jar sends it to any port).
	tab.a = second
	if tab.cookie() != cookie {
		t.Fatal("the tab's cookie changed")
	}
	st := tab.open(false, "notes")
	st.await(t, "notes", func(html string) bool { return strings.Contains(html, "after the restart") })
	if code, msg := tab.post("/notes", url.Values{"text": {"from the page"}}); code != http.StatusNoContent {
		t.Fatalf("the tab's form post: %d %s", code, msg)
	}
	st.await(t, "notes", func(html string) bool { return strings.Contains(html, "from the page") })
	// The join link of the first run sets the same cookie.
	other := second.browser(t)
	if code, _ := other.get(join); code != http.StatusSeeOther || other.cookie() != cookie {
		t.Fatalf("the first run's join link: %d, cookie %q, want %q", code, other.cookie(), cookie)
	}
	// Taken once only.
	if _, err := second.h.NewSession(webhost.SessionOptions{Credentials: &cr}); !errors.Is(err, webhost.ErrCredentialsInUse) {
		t.Fatalf("the same credentials twice: %v", err)
	}
	twin := cr
	twin.ID = ""
	if _, err := second.h.NewSession(webhost.SessionOptions{Credentials: &twin}); !errors.Is(err, webhost.ErrCredentialsInUse) {
		t.Fatalf("the same secrets under another id: %v", err)
	}
	// Once it ends, they reach nothing.
	s2.Close()
	if _, err := second.tryDial(token, stateful, nil); err == nil {
		t.Fatal("the token of an ended session connected")
	}
	if code, _ := second.browser(t).get(join); code != http.StatusNotFound {
		t.Fatalf("the join link of an ended session: %d", code)
	}
	if _, err := second.h.NewSession(webhost.SessionOptions{Credentials: &cr}); err != nil {
		t.Fatalf("made again after it ended: %v", err)
	}
}

// recordingReplicas is a Replicas of one process that records what the
// Host names sessions by.
type recordingReplicas struct {
	mu    sync.Mutex
	names []string
}

func (r *recordingReplicas) record(tokens ...string) {
	r.mu.Lock()
	r.names = append(r.names, tokens...)
	r.mu.Unlock()
}

func (r *recordingReplicas) Start(context.Context, webhost.Cluster) error { return nil }
func (r *recordingReplicas) Claim(_ context.Context, tokens ...string) error {
	r.record(tokens...)
	return nil
}
func (r *recordingReplicas) Release(tokens ...string) { r.record(tokens...) }
func (r *recordingReplicas) Forward(next http.Handler, token func(*http.Request) string, _ func(*http.Request) bool, _ func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if t := token(req); t != "" {
			r.record(t)
		}
		next.ServeHTTP(w, req)
	})
}
func (r *recordingReplicas) AuditSink(string) surface.AuditSink   { return nil }
func (r *recordingReplicas) Notify(context.Context, string) error { return nil }
func (r *recordingReplicas) Ready() error                         { return nil }
func (r *recordingReplicas) Close() error                         { return nil }
func (r *recordingReplicas) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}
func hexSHA256(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

var _ webhost.Replicas = (*recordingReplicas)(nil)

// The replicas' directory is told of sessions by the SHA-256 of their
// credentials, never a credential: in the claims, the releases and the
// requests it forwards. (So that a session made from its Credentials can
// be claimed as well.)
func TestReplicasSeeHashesOnly(t *testing.T) {
	rep := &recordingReplicas{}
	a := newApp(t, webhost.Options{Replicas: rep})
	s := a.session(t)
	b := a.browser(t)
	if code, _ := b.get(s.JoinPath()); code != http.StatusSeeOther {
		t.Fatalf("join: %d", code)
	}
	b.open(false, "notes")
	requireCode(t, callTool(t, a.dial(t, s.Token(), sessionless), "view:notes.board.read", "", nil), "ok")
	join := strings.TrimPrefix(s.JoinPath(), "/agentsurface/join/")
	secrets := []string{s.Token(), join, b.cookie()}
	s.Close()
	seen := rep.seen()
	for _, secret := range secrets {
		if !slices.Contains(seen, hexSHA256(secret)) {
			t.Errorf("the replicas were never told of %s… by its hash", secret[:6])
		}
	}
	for _, name := range seen {
		for _, secret := range secrets {
			if strings.Contains(name, secret) {
				t.Fatalf("the replicas were told a credential: %s…", secret[:6])
			}
		}
	}
}
