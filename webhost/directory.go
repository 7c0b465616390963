package webhost

// The session directory: the one place that makes sessions (create) and
// the one place that maps a request's credential to its session (lookup,
// by the credential's SHA-256). Everything else goes through these two.
//
// A session has three credentials: the browser's cookie, the MCP bearer
// token and the join code. The Host keeps their SHA-256 only (and the
// token and join code in clear, to hand them to the application, for the
// sessions it made in this process): a session of an earlier run is made
// again from those hashes ([Credentials]). The cookie is derived from the
// join code (cookieOf), so that a join link, however often followed and
// in whichever run, sets the one cookie of its session; the cookie does
// not give the join code back. The replicas' directory is given the
// hashes too, never a credential.
//
// A session made for a visitor's first page is unused until the page
// uses it: its event stream opens, a form posts, its MCP token or join
// link is presented. Unused sessions are held apart, a bounded pool of
// at most Options.MaxUnusedSessions reclaimed after
// Options.UnusedTimeout, the oldest first when it is full, so that
// requests without a cookie, however many, neither hold the capacity of
// used sessions nor grow the memory. When the used sessions reach
// Options.MaxSessions, a new one takes the place of the one idle the
// longest that has no open page; only when every session has an open
// page are new visitors refused.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// credential names the secrets a request presents.
type credential int

const (
	credCookie credential = iota // the browser's session cookie
	credToken                    // the MCP bearer token
	credJoin                     // the join code of a join link
)

// secretKey is how a secret is looked up: its hash, so that a map's
// comparisons give no timing signal about the secret itself.
type secretKey [32]byte

func keyOf(secret string) secretKey { return sha256.Sum256([]byte(secret)) }

// cookieOf is the session cookie that the join code join sets: an
// HMAC-SHA256 of a fixed label keyed by the code, so that every browser
// joining a session, in this run or a later one, gets the same cookie,
// and a cookie does not give the join code back.
func cookieOf(join string) string {
	m := hmac.New(sha256.New, []byte(join))
	m.Write([]byte("agentsurface session cookie"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// replicaToken is how a credential is named to the replicas' directory:
// its SHA-256, in hex.
func replicaToken(k secretKey) string { return hex.EncodeToString(k[:]) }

// ErrCredentialsInUse: a session with one of the credentials that
// SessionOptions.Credentials names is live already.
var ErrCredentialsInUse = errors.New("webhost: a live session has these credentials")

// directory indexes the live sessions. Host.mu guards it.
type directory struct {
	by     [3]map[secretKey]*Session // by credential
	byID   map[string]*Session       // by public id
	unused []*Session                // not yet used, oldest first
	used   int                       // sessions that are not unused
}

func newDirectory() directory {
	d := directory{byID: map[string]*Session{}}
	for i := range d.by {
		d.by[i] = map[secretKey]*Session{}
	}
	return d
}

// create makes a session of user, under the credentials cr when it is
// not nil (a session of an earlier run), else under new ones. A visitor's
// session starts in the unused pool, pushing the oldest unused one out
// when the pool is full; a session of the host API (hosted) starts used,
// taking the place of the session idle the longest when MaxSessions are
// used. With Options.Replicas, the session's credentials are claimed
// first and released again if the session is not made after all.
// Nothing is called under Host.mu but the bookkeeping.
func (h *Host) create(ctx context.Context, user string, keepShown, hosted bool, cr *Credentials) (*Session, error) {
	h.mu.Lock()
	closed, epoch := h.closed, h.epoch
	h.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	s := &Session{
		h: h, id: "s_" + randomToken()[:12], token: randomToken(), join: randomToken(),
		user: user, keepShown: keepShown, want: keepShown, hosted: hosted, unused: !hosted,
		created: time.Now(),
	}
	s.keys = [...]secretKey{credCookie: keyOf(cookieOf(s.join)), credToken: keyOf(s.token), credJoin: keyOf(s.join)}
	if cr != nil {
		s.token, s.join = "", "" // known by their hashes only
		s.keys = [...]secretKey{credCookie: cr.Cookie, credToken: cr.Token, credJoin: cr.Join}
		if cr.ID != "" {
			s.id = cr.ID
		}
	}
	s.lastSeen = s.created
	if h.opts.Replicas != nil {
		if err := h.opts.Replicas.Claim(ctx, s.replicaTokens()...); err != nil {
			h.stats.add(&h.stats.unavailable)
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err := s.init(); err != nil { // the application's code: Registry, NewViews
		h.release(s)
		return nil, err
	}
	out, err := h.index(s, epoch)
	for _, x := range out {
		h.log.Info("webhost: session reclaimed for a new one", "session", x.id)
		x.Close()
	}
	if err != nil {
		s.discard()
		h.release(s)
		return nil, err
	}
	h.log.Debug("webhost: session made", "session", s.id, "hosted", hosted, "restored", cr != nil)
	if keepShown {
		s.reconcile()
	}
	return s, nil
}

// index indexes a made session; it returns the sessions pushed out, for
// the caller to close without Host.mu held.
func (h *Host) index(s *Session, epoch uint64) ([]*Session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.epoch != epoch { // endSessions ran since the claim, which may have gone with a lost lease
		return nil, fmt.Errorf("%w: this replica's sessions were ended meanwhile", ErrUnavailable)
	}
	if h.dir.byID[s.id] != nil {
		return nil, ErrCredentialsInUse
	}
	for i, k := range s.keys {
		if h.dir.by[i][k] != nil {
			return nil, ErrCredentialsInUse
		}
	}
	var out []*Session
	if s.unused {
		if len(h.dir.unused) >= h.opts.MaxUnusedSessions {
			out = append(out, h.dir.unused[0])
			h.dropLocked(h.dir.unused[0])
		}
	} else if h.dir.used >= h.opts.MaxSessions {
		victim := h.idlestLocked()
		if victim == nil {
			h.stats.add(&h.stats.full)
			return nil, ErrTooManySessions
		}
		out = append(out, victim)
		h.dropLocked(victim)
	}
	for i, k := range s.keys {
		h.dir.by[i][k] = s
	}
	h.dir.byID[s.id] = s
	if s.unused {
		h.dir.unused = append(h.dir.unused, s)
	} else {
		h.dir.used++
	}
	return out, nil
}

// lookup returns the session a credential names, or nil. With use set,
// the request uses the session: an unused one becomes used, taking the
// place of the session idle the longest if MaxSessions are used (or
// failing with ErrTooManySessions when every one has an open page), and
// it is touched.
func (h *Host) lookup(kind credential, secret string, use bool) (*Session, error) {
	if secret == "" {
		return nil, nil
	}
	key := keyOf(secret)
	h.mu.Lock()
	s := h.dir.by[kind][key]
	var out *Session
	if s != nil && use && s.unused {
		if h.dir.used >= h.opts.MaxSessions {
			if out = h.idlestLocked(); out == nil {
				h.mu.Unlock()
				h.stats.add(&h.stats.full)
				return nil, ErrTooManySessions
			}
			h.dropLocked(out)
		}
		h.dir.unused = slices.DeleteFunc(h.dir.unused, func(x *Session) bool { return x == s })
		s.unused = false
		h.dir.used++
	}
	h.mu.Unlock()
	if out != nil {
		h.log.Info("webhost: session reclaimed for a new one", "session", out.id)
		out.Close()
	}
	if s != nil && use {
		s.touch()
	}
	return s, nil
}

// cookie returns the session cookie's value of r, or "".
func (h *Host) cookie(r *http.Request) string {
	c, err := r.Cookie(h.opts.CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// idlestLocked returns the used session idle the longest that has no
// open page and was not made by the host API, or nil.
func (h *Host) idlestLocked() *Session {
	var victim *Session
	var since time.Time
	for _, s := range h.dir.byID {
		if s.unused || s.hosted {
			continue
		}
		open, seen := s.pageState()
		if open {
			continue
		}
		if victim == nil || seen.Before(since) {
			victim, since = s, seen
		}
	}
	return victim
}

// dropLocked removes s from the directory: its credentials stop working
// at once. The caller closes it.
func (h *Host) dropLocked(s *Session) {
	for i, k := range s.keys {
		if h.dir.by[i][k] == s {
			delete(h.dir.by[i], k)
		}
	}
	if h.dir.byID[s.id] != s {
		return // dropped already
	}
	delete(h.dir.byID, s.id)
	if s.unused {
		h.dir.unused = slices.DeleteFunc(h.dir.unused, func(x *Session) bool { return x == s })
	} else {
		h.dir.used--
	}
	for u, p := range h.paired {
		if p == s {
			delete(h.paired, u)
		}
	}
	s.mu.Lock() // after h.mu in the lock order
	for id := range s.known {
		if h.confirming[id] == s {
			delete(h.confirming, id)
		}
	}
	s.mu.Unlock()
}

// forget removes an ended session from the directory and releases its
// tokens in the replicas' directory.
func (h *Host) forget(s *Session) {
	h.mu.Lock()
	h.dropLocked(s)
	h.mu.Unlock()
	h.release(s)
}

// release releases a session's tokens in the replicas' directory.
func (h *Host) release(s *Session) {
	if h.opts.Replicas != nil {
		h.opts.Replicas.Release(s.replicaTokens()...)
	}
}

// all returns the live sessions.
func (h *Host) all() []*Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*Session, 0, len(h.dir.byID))
	for _, s := range h.dir.byID {
		out = append(out, s)
	}
	return out
}

// sweep ends the unused sessions older than UnusedTimeout and the
// sessions idle at now.
func (h *Host) sweep(now time.Time) {
	h.mu.Lock()
	var stale []*Session
	for _, s := range h.dir.unused { // oldest first
		if now.Sub(s.created) < h.opts.UnusedTimeout {
			break
		}
		stale = append(stale, s)
	}
	h.mu.Unlock()
	for _, s := range stale {
		h.log.Debug("webhost: unused session reclaimed", "session", s.id)
		s.Close()
	}
	for _, s := range h.all() {
		if s.idleAt(now, h.opts.IdleTimeout) {
			h.log.Info("webhost: session expired", "session", s.id)
			s.Close()
		}
	}
}
