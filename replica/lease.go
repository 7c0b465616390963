package replica

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// lease is this replica's registration in agentsurface_replicas: its id,
// and when its claim on its sessions may have run out.
//
// The deadline is on the local monotonic clock: the start of the last
// successful renewal plus Lease. Postgres's expiry is its now() when it
// ran that renewal plus Lease, later than the start, so this replica
// stops counting on its lease no later than any other replica stops
// counting on it.
type lease struct {
	mu       sync.Mutex
	id       string
	deadline time.Time
	lost     bool // it ran out; not registered again yet
}

// current returns the current registration's id.
func (l *lease) current() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.id
}

// valid returns the registration's id if the lease holds at now, else
// ErrLeaseLost.
func (l *lease) valid(now time.Time) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost || !now.Before(l.deadline) {
		return "", ErrLeaseLost
	}
	return l.id, nil
}

// state returns the registration, its deadline and whether it was lost.
func (l *lease) state() (id string, deadline time.Time, lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.id, l.deadline, l.lost
}

// set records a new registration and its deadline.
func (l *lease) set(id string, deadline time.Time) {
	l.mu.Lock()
	l.id, l.deadline, l.lost = id, deadline, false
	l.mu.Unlock()
}

// extend moves the deadline of registration id, unless it is no longer
// current or was lost.
func (l *lease) extend(id string, deadline time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id != id || l.lost {
		return false
	}
	l.deadline = deadline
	return true
}

// lose marks registration id lost; false if it is not current or was
// lost already.
func (l *lease) lose(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id != id || l.lost {
		return false
	}
	l.lost = true
	return true
}

// loop renews the lease every Lease/20, and every Lease/50 while
// renewals fail, until Close. A request that finds the deadline passed
// wakes it, so that the lease is lost (and OnLeaseLost called) at once.
func (d *Directory) loop() {
	defer close(d.done)
	t := time.NewTimer(d.every)
	defer t.Stop()
	var f failures
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.wake:
			if _, _, lost := d.lease.state(); lost {
				continue // given up already: the timer registers again
			}
			t.Stop()
		}
		t.Reset(d.renew(&f))
	}
}

// failures throttles the log of failing renewals: the first, then one
// every Lease/4 while they go on, then the recovery.
type failures struct {
	since, logged time.Time
}

func (f *failures) failed(d *Directory, what, id string, left time.Duration, err error) {
	now := time.Now()
	if f.since.IsZero() {
		f.since = now
	}
	if now.Sub(f.logged) < d.opts.Lease/4 {
		return
	}
	f.logged = now
	d.log.Warn("replica: cannot "+what+"; retrying", "replica", id, "failing_for", now.Sub(f.since).Round(time.Millisecond),
		"lease_left", left.Round(time.Millisecond), "error", err)
}

func (f *failures) recovered(d *Directory, what, id string) {
	if f.since.IsZero() {
		return
	}
	d.log.Info("replica: "+what+" again", "replica", id, "after", time.Since(f.since).Round(time.Millisecond))
	*f = failures{}
}

// renew renews the lease, deletes released rows, learns which replicas
// are live (stopping requests forwarded to those that are not) and
// removes the rows of replicas dead for more than a lease — in one round
// trip. A lease whose deadline passes before a renewal succeeded is lost
// (the renewal's statement is cancelled at the deadline); then it
// registers again. It returns how long to wait before the next attempt.
func (d *Directory) renew(f *failures) time.Duration {
	id, deadline, lost := d.lease.state()
	if lost {
		if err := d.register(context.Background(), id); err != nil {
			f.failed(d, "register again after losing the lease", id, 0, err)
			return d.retry
		}
		f.recovered(d, "registered", d.ID())
		return d.every
	}
	start := time.Now()
	if !start.Before(deadline) {
		d.loseLease(id, errors.New("the lease ran out before it could be renewed"))
		return 0
	}
	end := start.Add(d.opts.Timeout)
	if deadline.Before(end) {
		end = deadline // an answer after it could not save the lease
	}
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	releases := d.owned.takeReleases(id)
	rel := make([][]byte, len(releases))
	for i := range releases {
		rel[i] = releases[i][:]
	}
	lease := d.opts.Lease.Milliseconds()
	var renewed bool
	var rows []replicaRow
	err := d.retried(ctx, func() error { // every statement is safe to repeat
		b := &pgx.Batch{}
		b.Queue(`UPDATE agentsurface_replicas SET expires_at = now() + $2 * interval '1 millisecond'
			WHERE id = $1 AND expires_at > now()`, id, lease)
		b.Queue(`DELETE FROM agentsurface_sessions WHERE replica = $1 AND key = ANY($2::bytea[])`, id, rel)
		b.Queue(`SELECT id, name, addr, expires_at > now() FROM agentsurface_replicas`)
		b.Queue(`DELETE FROM agentsurface_replicas WHERE expires_at < now() - $1 * interval '1 millisecond'`, lease)
		res := d.pool.SendBatch(ctx, b)
		defer res.Close()
		tag, err := res.Exec()
		if err != nil {
			return err
		}
		renewed = tag.RowsAffected() == 1
		if _, err := res.Exec(); err != nil {
			return err
		}
		q, err := res.Query()
		if err != nil {
			return err
		}
		rows, err = pgx.CollectRows(q, func(r pgx.CollectableRow) (replicaRow, error) {
			var row replicaRow
			err := r.Scan(&row.id, &row.name, &row.addr, &row.live)
			return row, err
		})
		if err != nil {
			return err
		}
		_, err = res.Exec()
		return err
	})
	now := time.Now()
	switch {
	case err != nil && now.Before(deadline):
		d.owned.putBackReleases(id, releases)
		f.failed(d, "renew the lease", id, deadline.Sub(now), err)
		return min(d.retry, deadline.Sub(now))
	case err != nil:
		d.loseLease(id, err)
		return 0
	case !renewed:
		d.loseLease(id, errors.New("the lease had expired in the directory"))
		return 0
	case !now.Before(deadline):
		// Renewed, but only after this replica had begun to answer its
		// sessions as ended: they stay ended.
		d.loseLease(id, errors.New("the renewal succeeded only after the lease's deadline"))
		return 0
	}
	d.lease.extend(id, start.Add(d.opts.Lease))
	f.recovered(d, "renewed the lease", id)
	d.owned.forgetOwners(d.peers.update(id, rows))
	return d.every
}

// register adds this replica to agentsurface_replicas under a new id,
// removing the row of its previous registration prev (if any), whose
// sessions end at once for every replica.
func (d *Directory) register(ctx context.Context, prev string) error {
	id := "r_" + rand.Text()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	err := d.retried(ctx, func() error {
		_, err := d.pool.Exec(ctx, `WITH previous AS (DELETE FROM agentsurface_replicas WHERE id = $5)
			INSERT INTO agentsurface_replicas (id, name, addr, expires_at)
			VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')`,
			id, d.opts.Name, d.addr, d.opts.Lease.Milliseconds(), prev)
		return err
	})
	if err != nil {
		return fmt.Errorf("replica: register: %w", err)
	}
	d.owned.begin(id)
	d.lease.set(id, start.Add(d.opts.Lease))
	d.log.Info("replica: registered", "replica", id, "name", d.opts.Name, "addr", d.addr, "lease", d.opts.Lease)
	return nil
}

// loseLease forgets the sessions of registration id, tells the host, and
// leaves registering again to the next renewal.
func (d *Directory) loseLease(id string, cause error) {
	if !d.lease.lose(id) {
		return
	}
	n := d.owned.begin("")
	d.stats.add(outcomeLeaseLost)
	d.log.Error("replica: lease lost; this replica's sessions have ended for every replica", "replica", id, "sessions", n, "cause", cause)
	if d.opts.OnLeaseLost != nil {
		d.opts.OnLeaseLost()
	}
}
