package replica

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// KeyOf returns the stored form of token, for tests that tamper with the
// table.
func (d *Directory) KeyOf(token string) []byte {
	k := d.key(token)
	return k[:]
}

// StopRenewing stops the renewal loop, as a process that stalls stops
// it: the directory goes on answering, and its lease runs out.
func (d *Directory) StopRenewing() { d.halt() }

// Crash closes the directory without leaving a trace, as if the process
// had stopped dead: its lease runs out on its own.
func (d *Directory) Crash() { _ = d.shutdown(false) }

// LeaseDeadline returns when this replica's lease runs out unless
// renewed, on the local clock.
func (d *Directory) LeaseDeadline() time.Time {
	_, deadline, _ := d.lease.state()
	return deadline
}

// SignHop signs a hop header as the forwarder does.
func (d *Directory) SignHop(from, to string, at time.Time, method, host, uri, token string) string {
	return d.signHop(from, to, at, method, host, uri, d.key(token))
}

// ParseHop exposes parseHop to the fuzz test.
func ParseHop(v string) error {
	_, err := parseHop(v)
	return err
}

// NewForwarder returns a forwarding handler of a directory that is never
// opened, to read its options.
func NewForwarder(opts *ForwardOptions) http.Handler {
	return (&Directory{log: slog.New(slog.DiscardHandler)}).Forward(http.NotFoundHandler(),
		func(*http.Request) string { return "" }, opts)
}

// ResponseHeaderTimeoutOf returns the ResponseHeaderTimeout a forwarding
// handler applies.
func ResponseHeaderTimeoutOf(h http.Handler) time.Duration {
	return h.(*forwarder).opts.ResponseHeaderTimeout
}

// NewAuditSinkOn returns a sink whose writes go to write instead of a
// COPY into Postgres: one call is one statement and one commit, given
// the invocation id of each row. write returns an error wrapping a
// *pgconn.PgError of class 22 or 23 to refuse the rows as invalid; any
// other error breaks the connection, and fails the statements sent
// behind it. Statements run when the writer reads their result, in the
// order they were sent, as Postgres runs them one after the other.
func NewAuditSinkOn(write func(ctx context.Context, invocations []string) error, opts *AuditOptions) *AuditSink {
	return newAuditSink(&funcStore{write: write}, opts)
}

// funcStore is an auditStore whose statements are calls of write.
type funcStore struct {
	write      func(ctx context.Context, invocations []string) error
	pending    [][]string // sent, not yet read
	maxPending int
}

func (f *funcStore) send(rows []auditRow, _ time.Time) error {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.invocation
	}
	f.pending = append(f.pending, ids)
	f.maxPending = max(f.maxPending, len(f.pending))
	return nil
}

func (f *funcStore) receive(end time.Time) error {
	if len(f.pending) == 0 {
		return errors.New("funcStore: nothing sent")
	}
	ids := f.pending[0]
	f.pending = f.pending[1:]
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	return f.write(ctx, ids)
}

func (f *funcStore) reset() { f.pending = nil }

// MostInFlight returns the most statements a sink of NewAuditSinkOn had
// sent and not yet read at once. Call it after Close.
func (s *AuditSink) MostInFlight() int {
	<-s.done
	return s.db.(*funcStore).maxPending
}

// Closing reports whether Close was called.
func (s *AuditSink) Closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
