package console

// What every request goes through before any route: the Host check
// (against DNS rebinding), the security headers, and the read deadline.

import (
	"net"
	"net/http"
	"strings"
	"time"
)

// ServeHTTP implements http.Handler: [App.Guard] around the routes.
// With Options.Replica, a request that passed the Host check and names a
// session another replica owns is forwarded to it.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// Guard returns h behind the checks every route of the App has, for
// handlers served beside it (the demo's /metrics):
//
//   - a request naming a host the App does not serve (Options.AllowedHosts
//     besides the loopback names) is answered 421 Misdirected Request
//     before anything else is done, so that a page on another domain whose
//     name resolves to this server (DNS rebinding) reaches nothing;
//   - every answer forbids framing (CSP frame-ancestors and
//     X-Frame-Options, against clickjacking of the Approve button), content
//     sniffing and referrers (the join link is a credential), and the page
//     may load scripts, styles and connections only from its own origin;
//   - a request body must arrive within Options.ReadTimeout, whatever the
//     server's own timeouts (a handler may still take long once it has:
//     event streams, calls waiting for approval).
func (a *App) Guard(h http.Handler) http.Handler { return a.admit(a.secured(h)) }

// admit checks the Host header and sets the read deadline of the body.
func (a *App) admit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.hostAllowed(r.Host) {
			secure(w)
			http.Error(w, "This server does not serve the host "+quoteHost(r.Host)+".", http.StatusMisdirectedRequest)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(a.opts.ReadTimeout))
		}
		h.ServeHTTP(w, r)
	})
}

// secured sets the security headers of every answer. (Forwarded requests
// get them from the owner, whose answer the forwarding relays.)
func (a *App) secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		h.ServeHTTP(w, r)
	})
}

// secure sets the security headers on w.
func secure(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
}

// contentSecurityPolicy allows the page only its own scripts, styles,
// connections and form targets, images of its own and data: (the icon),
// and no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"

// hostAllowed reports whether the App serves host (a Host header, with
// or without a port): a loopback name or address, or one of
// Options.AllowedHosts.
func (a *App) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
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
	for _, h := range a.opts.AllowedHosts {
		if h == "*" || strings.EqualFold(strings.TrimSuffix(h, "."), name) {
			return true
		}
	}
	return false
}

// quoteHost quotes a Host header for an error message, shortened.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "…"
	}
	return `"` + strings.ToValidUTF8(h, "?") + `"`
}
