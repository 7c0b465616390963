package mcpsurface_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pipeNet is an in-memory network for HTTP under synctest: net.Pipe
// connections, which block durably, instead of loopback sockets.
type pipeNet struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

func (p *pipeNet) Addr() net.Addr { return pipeAddr{} }

func (p *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// pipeHTTP serves h over a pipeNet; the returned client dials it. Stop
// ends the server and the client's connections.
type pipeHTTP struct {
	net    *pipeNet
	srv    *http.Server
	client *http.Client
	tr     *http.Transport
}

func servePipe(h http.Handler) *pipeHTTP {
	p := &pipeHTTP{net: newPipeNet(), srv: &http.Server{Handler: h}}
	p.tr = &http.Transport{DialContext: p.net.dial}
	p.client = &http.Client{Transport: p.tr}
	go func() { _ = p.srv.Serve(p.net) }()
	return p
}

func (p *pipeHTTP) stop() {
	p.tr.CloseIdleConnections()
	_ = p.srv.Close()
}

// connectPipe opens a session over p with a token.
func connectPipe(t *testing.T, p *pipeHTTP, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://pipe/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token, p.tr}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pipe-client", Version: "1"}, opts).
		Connect(bg, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", token, err)
	}
	return cs
}
