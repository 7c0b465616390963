package webhost

// What every request goes through before any route: the Host check
// (against DNS rebinding), the body's size and read time, and the
// security headers.

import (
	"net"
	"net/http"
	"strings"
	"time"
)

// admit checks the Host header, refuses bodies that declare more than
// MaxBodyBytes, caps the others and sets their read deadline. A request
// that arrives after Close is answered 503.
func (h *Host) admit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.hostAllowed(r.Host) {
			h.secure(w)
			h.stats.add(&h.stats.host)
			http.Error(w, "This server does not serve the host "+quoteHost(r.Host)+".", http.StatusMisdirectedRequest)
			return
		}
		if h.isClosed() {
			h.secure(w)
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			http.Error(w, "This server is shutting down.", http.StatusServiceUnavailable)
			return
		}
		if r.ContentLength > h.opts.MaxBodyBytes {
			h.secure(w)
			h.stats.add(&h.stats.tooLarge)
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.opts.ReadTimeout))
			r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// secured sets the security headers of every answer. (Forwarded requests
// get them from the owner, whose answer the forwarding relays.)
func (h *Host) secured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.secure(w)
		next.ServeHTTP(w, r)
	})
}

// secure sets the security headers on w: no framing (the Approve button
// cannot be clickjacked), no sniffing, no referrer (a join link is a
// credential), and the Content-Security-Policy.
func (h *Host) secure(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Security-Policy", h.csp)
}

// hostAllowed reports whether the Host serves host (a Host header, with
// or without a port): a loopback name or address, or one of
// Options.AllowedHosts.
func (h *Host) hostAllowed(host string) bool {
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if name == "" {
		return false
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") { // RFC 6761: always loopback
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range h.opts.AllowedHosts {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "."), name) {
			return true
		}
	}
	return false
}

// quoteHost quotes a Host header for an error message, shortened.
func quoteHost(host string) string {
	if len(host) > 100 {
		host = host[:100] + "…"
	}
	return `"` + strings.ToValidUTF8(host, "?") + `"`
}
