// Package pgdomain opens the devices domain's [domain.Store] on a
// PostgreSQL server, through the pgx driver. It is a package of its own so
// that a program that keeps the devices in SQLite (package domain's
// default) neither compiles nor links pgx.
package pgdomain

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
)

// Open opens the devices database on the PostgreSQL server url names (a
// postgres:// URL or keyword/value connection string, as pgx parses it)
// and migrates its schema, as [domain.OpenPostgresDB] describes. A
// malformed url is an error matching [domain.ErrInvalid]; no error
// quotes the password.
func Open(ctx context.Context, url string) (*domain.Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// The parser's message may quote the URL, password included.
		return nil, fmt.Errorf("%w: the PostgreSQL URL is malformed", domain.ErrInvalid)
	}
	db := stdlib.OpenDB(*cfg)
	s, err := domain.OpenPostgresDB(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w (database %s on %s)", err, cfg.Database, cfg.Host)
	}
	return s, nil
}
