package replica

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// retried runs f, a statement or transaction that is safe to repeat, and
// runs it again when it failed on a connection that broke: a Postgres
// restart breaks every connection of the pool at once, and the pool
// drops each one as it fails (and pings those idle for more than a second
// before handing them out), so at most MaxConns + 1 tries reach a fresh
// connection. It never touches the pool itself. It stops at once when
// Postgres refused the statement, when no connection could be made
// (Postgres is down: trying again at once is useless), or when ctx ends.
func (d *Directory) retried(ctx context.Context, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		if err == nil || try >= d.attempts || ctx.Err() != nil || !brokenConn(err) {
			return err
		}
	}
}

// brokenConn reports whether err is the failure of a connection that had
// been made, rather than a refusal by Postgres, a failed attempt to
// connect, or the caller's own error.
func brokenConn(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce), errors.Is(err, pgx.ErrNoRows), errors.Is(err, ErrClaimed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &pe):
		// Connection exceptions, and the server terminating the session
		// (a shutdown, pg_terminate_backend).
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	}
	return true
}
