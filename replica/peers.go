package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"

	"github.com/jackc/pgx/v5"
)

// peer is another live replica.
type peer struct {
	id, name, addr string
	url            *url.URL
	inflight       map[*inflight]struct{} // requests forwarded to it (guarded by peers.mu)
	gone           bool                   // guarded by peers.mu
}

// inflight is one request forwarded to a peer; stop ends it.
type inflight struct{ stop func(error) }

// replicaRow is a row of agentsurface_replicas as a renewal reads it.
type replicaRow struct {
	id, name, addr string
	live           bool
}

// Why a peer is no longer live, as the log says.
const (
	whyLeft    = "it left the directory (a clean stop)"
	whyExpired = "its lease ran out (it stopped renewing: a crash, a stall, or Postgres unreachable from it)"
)

// peers are the other replicas this one knows to be live, from each
// renewal's read of agentsurface_replicas and from owner lookups. The
// requests forwarded to one are tracked, so that they stop when it goes.
// Each replica that joins or leaves is logged once.
type peers struct {
	mu   sync.Mutex
	log  *slog.Logger
	byID map[string]*peer
}

func (ps *peers) init(log *slog.Logger) {
	ps.log = log
	ps.byID = map[string]*peer{}
}

// get returns the live peer id, or nil.
func (ps *peers) get(id string) *peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.byID[id]
}

// found returns the peer of a live row an owner lookup read, adding it
// if it is new.
func (ps *peers) found(id, name, addr string) (*peer, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.byID[id]; p != nil {
		return p, nil
	}
	p, err := newPeer(id, name, addr)
	if err != nil {
		return nil, err
	}
	ps.byID[id] = p
	ps.log.Info("replica: a peer is live", "peer", id, "name", name, "addr", addr)
	return p, nil
}

func newPeer(id, name, addr string) (*peer, error) {
	u, err := url.Parse(addr)
	if err != nil || checkAddr(addr) != nil {
		return nil, fmt.Errorf("%w: replica %s has the invalid address %q", ErrOwnerUnreachable, id, addr)
	}
	return &peer{id: id, name: name, addr: addr, url: u, inflight: map[*inflight]struct{}{}}, nil
}

// update takes in the rows a renewal read: the live replicas other than
// self are the peers from now on; those no longer live are forgotten
// (their requests stopped with ErrOwnerGone). It returns the ids of the
// forgotten ones.
func (ps *peers) update(self string, rows []replicaRow) map[string]bool {
	present := make(map[string]bool, len(rows))
	var joined []*peer
	ps.mu.Lock()
	for _, r := range rows {
		present[r.id] = true
		if !r.live || r.id == self || ps.byID[r.id] != nil {
			continue
		}
		if p, err := newPeer(r.id, r.name, r.addr); err == nil {
			ps.byID[r.id] = p
			joined = append(joined, p)
		}
	}
	var expired, left []*peer
	for _, r := range rows {
		if p := ps.byID[r.id]; p != nil && !r.live {
			expired = append(expired, p)
		}
	}
	for id, p := range ps.byID {
		if !present[id] {
			left = append(left, p)
		}
	}
	ps.mu.Unlock()
	for _, p := range joined {
		ps.log.Info("replica: a peer is live", "peer", p.id, "name", p.name, "addr", p.addr)
	}
	gone := map[string]bool{}
	for _, p := range ps.forget(whyExpired, expired...) {
		gone[p] = true
	}
	for _, p := range ps.forget(whyLeft, left...) {
		gone[p] = true
	}
	return gone
}

// track registers a request forwarded to p; forget stops it with
// ErrOwnerGone if p goes first. It returns the function that unregisters
// it, or false when p is already gone.
func (ps *peers) track(p *peer, stop func(error)) (untrack func(), ok bool) {
	f := &inflight{stop: stop}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.gone {
		return nil, false
	}
	p.inflight[f] = struct{}{}
	return func() {
		ps.mu.Lock()
		delete(p.inflight, f)
		ps.mu.Unlock()
	}, true
}

// forget removes replicas that are no longer live, saying why: requests
// for their sessions are answered as ended from now on, and those
// forwarded to them and still waiting stop with ErrOwnerGone. It returns
// the ids of those it forgot (not already gone).
func (ps *peers) forget(why string, gone ...*peer) []string {
	if len(gone) == 0 {
		return nil
	}
	var ids []string
	var stopped []*inflight
	ps.mu.Lock()
	var now []*peer
	for _, p := range gone {
		if p.gone {
			continue
		}
		p.gone = true
		if ps.byID[p.id] == p {
			delete(ps.byID, p.id)
		}
		ids = append(ids, p.id)
		now = append(now, p)
		for f := range p.inflight {
			stopped = append(stopped, f)
		}
	}
	ps.mu.Unlock()
	for _, p := range now {
		if why == whyLeft {
			ps.log.Info("replica: a peer left; its sessions have ended", "peer", p.id, "name", p.name, "addr", p.addr, "why", why)
		} else {
			ps.log.Warn("replica: a peer's lease ran out; its sessions have ended", "peer", p.id, "name", p.name, "addr", p.addr, "why", why)
		}
	}
	for _, f := range stopped {
		f.stop(ErrOwnerGone)
	}
	return ids
}

// left reports whether p, which refused a connection, is no longer live
// in the directory: it left (a clean stop deletes its row at once) or
// its lease ran out. Then it is forgotten, without waiting for the next
// renewal. When Postgres cannot say, p stays: the answer is the 503 of
// an unreachable owner.
func (d *Directory) left(ctx context.Context, p *peer) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.Timeout)
	defer cancel()
	var live bool
	err := d.retried(ctx, func() error {
		return d.pool.QueryRow(ctx, `SELECT expires_at > now() FROM agentsurface_replicas WHERE id = $1`, p.id).Scan(&live)
	})
	why := whyExpired
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		why = whyLeft
	case err != nil || live:
		return false
	}
	d.owned.forgetOwners(map[string]bool{p.id: true})
	d.peers.forget(why, p)
	return true
}
