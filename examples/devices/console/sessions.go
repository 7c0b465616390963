package console

// The session directory: the one place that makes sessions (create) and
// the one place that maps a request's credential to its session (lookup,
// by the credential's SHA-256). Everything else goes through these two.
//
// A session made for a visitor's first page is unused until the page
// uses it: its event stream opens, a form posts, its MCP token or join
// link is presented. Unused sessions are held apart, a bounded pool of
// at most Options.MaxUnusedSessions reclaimed after Options.UnusedTimeout,
// the oldest first when it is full, so that requests without a cookie,
// however many, neither hold the capacity of used sessions nor grow the
// memory. When the used sessions reach Options.MaxSessions, a new one
// takes the place of the one idle the longest that has no open page;
// only when every session has an open page are new visitors refused.

import (
	"context"
	"crypto/sha256"
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
	credJoin                     // the join code of a /join/… link
)

// secretKey is how a secret is looked up: its hash, so that a map's
// comparisons give no timing signal about the secret itself.
type secretKey [32]byte

func keyOf(secret string) secretKey { return sha256.Sum256([]byte(secret)) }

// directory indexes the live sessions. App.mu guards it.
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

// create makes a session. A visitor's session starts in the unused pool,
// pushing the oldest unused one out when the pool is full; a session of
// the host API (hosted) starts used, taking the place of the session idle
// the longest when MaxSessions are used. It returns the sessions pushed
// out, for the caller to close without App.mu held. With
// Options.Replica, the session's tokens are claimed in the session
// directory first (without App.mu held), and released again if the
// session is not made after all.
func (a *App) create(ctx context.Context, o SessionOptions, hosted bool) (*Session, []*Session, error) {
	unused := !hosted
	if o.User.ID == "" {
		o.User = Operator
	}
	cookie, token, join, id := randomToken(), randomToken(), randomToken(), "s_"+randomToken()[:10]
	a.mu.Lock()
	closed, epoch := a.closed, a.epoch
	a.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	if err := a.claim(ctx, cookie, token, join); err != nil {
		return nil, nil, err
	}
	s, out, err := a.admitSession(o, hosted, unused, epoch, cookie, token, join, id)
	if err != nil && a.rep != nil {
		a.rep.Directory.Release(cookie, token, join)
	}
	return s, out, err
}

// admitSession makes and indexes the session of create; it takes App.mu.
func (a *App) admitSession(o SessionOptions, hosted, unused bool, epoch uint64, cookie, token, join, id string) (*Session, []*Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, nil, ErrClosed
	}
	if a.epoch != epoch { // EndSessions ran since the claim, which may have gone with a lost lease
		return nil, nil, fmt.Errorf("%w: this replica's sessions were ended meanwhile", ErrUnavailable)
	}
	var out []*Session
	if unused {
		if len(a.dir.unused) >= a.opts.MaxUnusedSessions {
			out = append(out, a.dir.unused[0])
			a.dropLocked(a.dir.unused[0])
		}
	} else if a.dir.used >= a.opts.MaxSessions {
		victim := a.idlestLocked()
		if victim == nil {
			return nil, nil, ErrTooManySessions
		}
		out = append(out, victim)
		a.dropLocked(victim)
	}
	s := newSession(a, o, cookie, token, join, id)
	s.unused, s.hosted = unused, hosted
	a.dir.by[credCookie][keyOf(cookie)] = s
	a.dir.by[credToken][keyOf(token)] = s
	a.dir.by[credJoin][keyOf(join)] = s
	a.dir.byID[id] = s
	if unused {
		a.dir.unused = append(a.dir.unused, s)
	} else {
		a.dir.used++
	}
	return s, out, nil
}

// lookup returns the session a credential names, or nil. With use set,
// the request uses the session: an unused one becomes used, taking the
// place of the session idle the longest if MaxSessions are used (or
// failing with ErrTooManySessions, when every one has an open page), and
// it is touched.
func (a *App) lookup(kind credential, secret string, use bool) (*Session, error) {
	if secret == "" {
		return nil, nil
	}
	key := keyOf(secret)
	a.mu.Lock()
	s := a.dir.by[kind][key]
	var out *Session
	if s != nil && use && s.unused {
		if a.dir.used >= a.opts.MaxSessions {
			if out = a.idlestLocked(); out == nil {
				a.mu.Unlock()
				return nil, ErrTooManySessions
			}
			a.dropLocked(out)
		}
		a.dir.unused = slices.DeleteFunc(a.dir.unused, func(x *Session) bool { return x == s })
		s.unused = false
		a.dir.used++
	}
	a.mu.Unlock()
	if out != nil {
		a.log.Info("console: session reclaimed for a new visitor", "session", out.id)
		out.Close()
	}
	if s != nil && use {
		s.touch()
	}
	return s, nil
}

// sessionOf returns the session of r's cookie (see lookup).
func (a *App) sessionOf(r *http.Request, use bool) (*Session, error) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, nil
	}
	return a.lookup(credCookie, c.Value, use)
}

// full answers a request that would use a session when none can be:
// every session has an open page.
func full(w http.ResponseWriter) {
	http.Error(w, "The console is serving as many pages as it can; try again later.", http.StatusServiceUnavailable)
}

// idlestLocked returns the used session idle the longest that has no
// open page and was not made by the host API, or nil.
func (a *App) idlestLocked() *Session {
	var victim *Session
	var since time.Time
	for _, s := range a.dir.byID {
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
func (a *App) dropLocked(s *Session) {
	for i, secret := range [...]string{credCookie: s.cookie, credToken: s.token, credJoin: s.join} {
		if k := keyOf(secret); a.dir.by[i][k] == s {
			delete(a.dir.by[i], k)
		}
	}
	if a.dir.byID[s.id] != s {
		return // dropped already
	}
	delete(a.dir.byID, s.id)
	if s.unused {
		a.dir.unused = slices.DeleteFunc(a.dir.unused, func(x *Session) bool { return x == s })
	} else {
		a.dir.used--
	}
}

// forget removes an ended session from the directory, and releases its
// tokens in the session directory of the replicas.
func (a *App) forget(s *Session) {
	a.mu.Lock()
	a.dropLocked(s)
	a.mu.Unlock()
	a.release(s)
}

// all returns the live sessions.
func (a *App) all() []*Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*Session, 0, len(a.dir.byID))
	for _, s := range a.dir.byID {
		out = append(out, s)
	}
	return out
}

// byPublicID returns the session whose public id is id.
func (a *App) byPublicID(id string) *Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dir.byID[id]
}

// sweep ends the unused sessions older than UnusedTimeout and the
// sessions idle at now.
func (a *App) sweep(now time.Time) {
	a.mu.Lock()
	var stale []*Session
	for _, s := range a.dir.unused { // oldest first
		if now.Sub(s.created) < a.opts.UnusedTimeout {
			break
		}
		stale = append(stale, s)
	}
	a.mu.Unlock()
	for _, s := range stale {
		a.log.Debug("console: unused session reclaimed", "session", s.id)
		s.Close()
	}
	for _, s := range a.all() {
		if s.idleAt(now, a.opts.IdleTimeout) {
			a.log.Info("console: session expired", "session", s.id)
			s.Close()
		}
	}
}
