package replica

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
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
// *pgconn.PgError of class 22 or 23 to refuse the rows as invalid.
func NewAuditSinkOn(write func(ctx context.Context, invocations []string) error, opts *AuditOptions) *AuditSink {
	col := slices.Index(auditColumns, "invocation_id")
	return newAuditSink(func(ctx context.Context, rows [][]any) error {
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i], _ = r[col].(string)
		}
		return write(ctx, ids)
	}, opts)
}

// Closing reports whether Close was called.
func (s *AuditSink) Closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
