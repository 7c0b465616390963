package lbtest_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentsurface/agentsurface/internal/lbtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend answers its name and the request body.
func backend(t *testing.T, name string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", name, r.Host, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, body string) string {
	t.Helper()
	res, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	return string(b)
}

func TestRoundRobinWithoutStickiness(t *testing.T) {
	a, b, c := backend(t, "a"), backend(t, "b"), backend(t, "c")
	lb, err := lbtest.New(a.URL, b.URL, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	front := httptest.NewServer(lb)
	defer front.Close()
	var names []string
	for range 6 {
		got := get(t, front.URL, "x")
		name, rest, _ := strings.Cut(got, " ")
		// The backend sees the balancer's host and the whole body.
		if want := strings.TrimPrefix(front.URL, "http://") + " x"; rest != want {
			t.Fatalf("backend saw %q, want %q", rest, want)
		}
		names = append(names, name)
	}
	if want := []string{"a", "b", "c", "a", "b", "c"}; !slices.Equal(names, want) {
		t.Fatalf("backends in turn: %v, want %v", names, want)
	}
	if got := lb.Served(); !slices.Equal(got, []int64{2, 2, 2}) {
		t.Fatalf("Served = %v", got)
	}
}

func TestRefusedBackendIsSkipped(t *testing.T) {
	a, b := backend(t, "a"), backend(t, "b")
	lb, err := lbtest.New(a.URL, b.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	front := httptest.NewServer(lb)
	defer front.Close()
	b.Close()
	for range 4 {
		if got := get(t, front.URL, "body"); !strings.HasPrefix(got, "a ") || !strings.HasSuffix(got, " body") {
			t.Fatalf("answer %q, want a's, with the body sent again", got)
		}
	}
	a.Close()
	res, err := http.Get(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("no backend: status %d, want 502", res.StatusCode)
	}
}

func TestResponsesStream(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	lb, err := lbtest.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	front := httptest.NewServer(lb)
	defer front.Close()
	defer close(release)
	res, err := http.Get(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(res.Body).ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		if l != "data: first\n" {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not stream through while the response is open")
	}
}

// Buffered hands the handler behind it the whole body, read before it
// runs (so a proxy behind it never reads the server's own body), with
// its length and a GetBody; a body over 4 MiB is refused with 413 and
// never reaches the handler.
func TestBufferedReadsTheWholeBodyFirst(t *testing.T) {
	type seen struct {
		body   string
		length int64
		again  string
	}
	got := make(chan seen, 1)
	var inner http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		again := ""
		if r.GetBody != nil {
			rc, _ := r.GetBody()
			a, _ := io.ReadAll(rc)
			again = string(a)
		}
		got <- seen{string(b), r.ContentLength, again}
	})
	front := httptest.NewServer(lbtest.Buffered(inner))
	defer front.Close()
	for _, size := range []int{1, 100, 64 << 10, 4 << 20} {
		body := strings.Repeat("x", size)
		res, err := http.Post(front.URL, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		s := <-got
		if s.body != body || s.length != int64(size) || s.again != body {
			t.Fatalf("size %d: the handler saw %d bytes, ContentLength %d, GetBody %d bytes", size, len(s.body), s.length, len(s.again))
		}
	}
	res, err := http.Post(front.URL, "text/plain", strings.NewReader(strings.Repeat("x", 4<<20+1)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over 4 MiB: status %d, want 413", res.StatusCode)
	}
	select {
	case s := <-got:
		t.Fatalf("a body over 4 MiB reached the handler (%d bytes)", len(s.body))
	default:
	}
}
