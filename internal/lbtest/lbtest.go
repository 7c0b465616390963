// Package lbtest is a round-robin HTTP load balancer for tests of
// replicated deployments.
//
// It is the least helpful balancer a deployment may sit behind: no
// stickiness at all — each request goes to the next backend in turn,
// whatever its cookies or headers — so a test through it proves that
// every request reaches its session's owner by the replicas' own
// forwarding. Like a real balancer's passive health check, a request
// whose connection to a backend is refused (a replica that has stopped)
// goes to the next one; any other failure is answered 502. Responses
// stream: every write of a backend reaches the client at once (event
// streams, MCP streams).
package lbtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
)

// maxBody bounds the request bodies the balancer buffers (to send one
// again to the next backend when a connection is refused).
const maxBody = 4 << 20

// Balancer is an http.Handler spreading requests over backends in turn.
// It is safe for concurrent use.
type Balancer struct {
	backends []*url.URL
	proxy    *httputil.ReverseProxy
	tr       *http.Transport

	closeOnce sync.Once

	mu     sync.Mutex
	next   int     // the backend the next request goes to first
	served []int64 // requests answered by each backend
}

// New returns a balancer over the backends' base URLs ("http://host:port").
func New(backends ...string) (*Balancer, error) {
	if len(backends) == 0 {
		return nil, errors.New("lbtest: no backends")
	}
	b := &Balancer{served: make([]int64, len(backends))}
	for _, s := range backends {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("lbtest: bad backend URL %q", s)
		}
		b.backends = append(b.backends, u)
	}
	b.tr = http.DefaultTransport.(*http.Transport).Clone()
	b.tr.MaxIdleConnsPerHost = 64
	b.proxy = &httputil.ReverseProxy{
		// The request keeps the Host it was sent with: the replicas are
		// reached under the balancer's name, as behind a real one.
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetXForwarded(); pr.Out.Host = pr.In.Host },
		Transport:     roundTripper(b.roundTrip),
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "lbtest: no backend answered: "+err.Error(), http.StatusBadGateway)
		},
	}
	return b, nil
}

// ServeHTTP sends r to the next backend.
func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	Buffered(b.proxy).ServeHTTP(w, r)
}

// Buffered returns a handler that reads each request's body whole (at
// most 4 MiB; a larger or unreadable one is answered 413) before next
// serves the request, with the body, GetBody and ContentLength of the
// bytes read, as a real balancer buffers requests.
//
// Put it in front of an [httputil.ReverseProxy] served by a net/http
// server that is not in full-duplex mode, as every test's front proxy
// must be: there the server drains and closes a request's body when the
// answer's headers go out. A backend that answers as soon as it has read
// its body, as an MCP server opening an event stream does, can send its
// headers before the proxy's transport has made its final read of the
// body (the read that finds its end); the transport's read then fails,
// and the transport closes its connection to the backend, cutting the
// answer it is relaying ("use of closed network connection" in the
// proxy's log, a stream that ends without its response at the client).
func Buffered(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil || len(body) > maxBody {
				http.Error(w, "lbtest: request body unreadable or too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			r.ContentLength = int64(len(body))
		}
		next.ServeHTTP(w, r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// roundTrip tries the backends in turn from the next one, moving on only
// when a connection is refused (nothing of the request was sent).
func (b *Balancer) roundTrip(r *http.Request) (*http.Response, error) {
	n := len(b.backends)
	b.mu.Lock()
	start := b.next
	b.next = (b.next + 1) % n
	b.mu.Unlock()
	var err error
	for k := range n {
		i := (start + k) % n
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host = b.backends[i].Scheme, b.backends[i].Host
		if r.GetBody != nil {
			if out.Body, err = r.GetBody(); err != nil {
				return nil, err
			}
		}
		var res *http.Response
		res, err = b.tr.RoundTrip(out)
		if err == nil {
			b.mu.Lock()
			b.served[i]++
			b.mu.Unlock()
			return res, nil
		}
		if !refused(err) || r.Context().Err() != nil {
			return nil, err
		}
	}
	return nil, err
}

// refused reports whether err is a failure to connect.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && !errors.Is(err, context.Canceled)
}

// Served returns how many requests each backend has answered, in the
// order of New's arguments.
func (b *Balancer) Served() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.served)
}

// Close closes the balancer's idle connections to the backends.
func (b *Balancer) Close() { b.closeOnce.Do(b.tr.CloseIdleConnections) }
