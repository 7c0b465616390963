// Package pgdemo opens what `agentsurface demo --postgres` runs on: the
// devices domain on PostgreSQL and this replica's part in a replicated
// deployment (its session directory, durable audit and change
// notifications, through package webreplica).
//
// It is a package of its own, beside the command, so that the command
// links pgx, package replica and webreplica only when built with the
// postgres build tag (its file feature_postgres.go plugs [Open] in), while
// `go test ./...` compiles and tests this package in every build.
package pgdemo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/examples/devices/domain/pgdomain"
	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/webhost/webreplica"
)

// NotifyChannel is the Postgres LISTEN/NOTIFY channel on which the
// console's replicas tell each other of domain writes.
const NotifyChannel = "agentsurface_devices"

// Config is a replica's configuration, from the demo's flags and
// environment.
type Config struct {
	// URL is the PostgreSQL database (--postgres).
	URL string
	// Addr is the base URL at which the other replicas reach this one.
	Addr string
	// Secret is the secret every replica shares, 32 bytes or more.
	Secret []byte
	// Name names this replica in logs and in the audit table.
	Name string
	// Lease is how long this replica's sessions outlive its last renewal.
	Lease time.Duration
	// DurableAudit answers a call only once its audit record is committed
	// (replica.AuditOptions.Durable).
	DurableAudit bool
	// Logger receives the replica's diagnostics; nil discards them.
	Logger *slog.Logger
}

// Deployment is what Open sets up on one PostgreSQL database.
type Deployment struct {
	// Store is the devices domain, migrated and seeded.
	Store *domain.Store
	// Replicas is this replica's part, for webhost.Options.Replicas: the
	// console's Host starts it (joining the deployment) and closes it.
	Replicas *webreplica.Replicas

	pool *pgxpool.Pool
}

// Open connects to c.URL, migrates and seeds the devices domain there,
// and prepares this replica's part, which the console's Host starts.
func Open(ctx context.Context, c Config) (_ *Deployment, err error) {
	if len(c.Secret) < 32 {
		return nil, errors.New("pgdemo: the replicas' secret must hold at least 32 bytes")
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Deployment{}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.Store, err = pgdomain.Open(ctx, c.URL); err != nil {
		return nil, err
	}
	if err = d.Store.Seed(ctx); err != nil {
		return nil, err
	}
	if d.pool, err = pgxpool.New(ctx, c.URL); err != nil {
		return nil, fmt.Errorf("connect to --postgres: %w", err)
	}
	// Durable audit waits at most 2 s per record while Postgres is away,
	// rather than the 5 s default.
	d.Replicas, err = webreplica.New(d.pool, c.Addr, c.Secret, &webreplica.Options{
		Directory: replica.Options{Name: c.Name, Lease: c.Lease, Logger: log},
		Channel:   NotifyChannel,
		Notifier:  replica.NotifierOptions{Logger: log},
		Audit: &replica.AuditOptions{Replica: c.Name, Logger: log,
			Durable: c.DurableAudit, Timeout: 2 * time.Second},
		Migrate: true,
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// ReplicaID is this replica's id in the session directory, once the
// console's Host has started its Replicas; "" before.
func (d *Deployment) ReplicaID() string {
	if dir := d.Replicas.Directory(); dir != nil {
		return dir.ID()
	}
	return ""
}

// Close closes the database connections. Call it after the console's
// Host has closed (and so has left the deployment).
func (d *Deployment) Close() {
	if d.pool != nil {
		d.pool.Close()
	}
	if d.Store != nil {
		_ = d.Store.Close()
	}
}
