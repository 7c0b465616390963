package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/examples/devices/domain/pgdomain"
	"github.com/agentsurface/agentsurface/replica"
)

// envReplicaSecret names the variable holding the secret every replica
// shares (never a flag: flags show in process listings).
const envReplicaSecret = "AGENTSURFACE_REPLICA_SECRET"

// replicaFlags are the demo's flags for a replicated deployment.
type replicaFlags struct {
	postgres string        // --postgres: the database URL; "" runs on SQLite alone
	addr     string        // --replica-addr: where the other replicas reach this one
	name     string        // --replica-name
	lease    time.Duration // --replica-lease
	// --audit-durable: a call is answered once its audit record is
	// committed (replica.AuditOptions.Durable)
	durableAudit bool
}

// deployment is what --postgres sets up on one Postgres database: the
// devices domain, and this replica's session directory, audit sink and
// change notifier.
type deployment struct {
	store *domain.Store
	pool  *pgxpool.Pool
	// rep is the console's side: its directory, audit sink and
	// notifier, whose callbacks reach the console once it exists.
	rep console.Replica
}

// openDeployment connects to f.postgres, migrates it, and joins the
// replicas. ln is the demo's listener: by default the other replicas
// reach this one at its address.
func openDeployment(ctx context.Context, f replicaFlags, ln net.Listener, log *slog.Logger) (_ *deployment, err error) {
	secret, err := replicaSecret(f.addr != "", log)
	if err != nil {
		return nil, err
	}
	addr := f.addr
	if addr == "" {
		tcp, _ := ln.Addr().(*net.TCPAddr)
		if tcp == nil || tcp.IP.IsUnspecified() {
			return nil, errors.New("--replica-addr is needed when --addr listens on every interface: give the address the other replicas reach this one at, e.g. http://10.0.0.5:8080")
		}
		addr = "http://" + ln.Addr().String()
	}
	d := &deployment{}
	defer func() {
		if err != nil {
			d.close(log)
		}
	}()
	if d.store, err = pgdomain.Open(ctx, f.postgres); err != nil {
		return nil, err
	}
	if err = d.store.Seed(ctx); err != nil {
		return nil, err
	}
	if d.pool, err = pgxpool.New(ctx, f.postgres); err != nil {
		return nil, fmt.Errorf("connect to --postgres: %w", err)
	}
	if err = replica.Migrate(ctx, d.pool); err != nil {
		return nil, err
	}
	d.rep.Directory, err = replica.OpenDirectory(ctx, d.pool, addr, secret, &replica.Options{
		Name: f.name, Lease: f.lease, Logger: log, OnLeaseLost: d.rep.LeaseLost,
	})
	if err != nil {
		return nil, err
	}
	// Durable: waits at most 2 s per record while Postgres is away, rather
	// than the 5 s default.
	d.rep.Audit = replica.NewAuditSink(d.pool, &replica.AuditOptions{Replica: f.name, Logger: log,
		Durable: f.durableAudit, Timeout: 2 * time.Second})
	d.rep.Notifier, err = replica.NewNotifier(ctx, d.pool, console.NotifyChannel, d.rep.Notified,
		&replica.NotifierOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("replica joined", "id", d.rep.Directory.ID(), "name", f.name, "addr", addr)
	return d, nil
}

// replicaSecret is $AGENTSURFACE_REPLICA_SECRET, required when other
// replicas are to reach this one (shared bytes authenticate what they
// forward); a lone replica may make one up.
func replicaSecret(shared bool, log *slog.Logger) ([]byte, error) {
	if s := os.Getenv(envReplicaSecret); s != "" {
		if len(s) < 32 {
			return nil, fmt.Errorf("$%s must hold at least 32 bytes", envReplicaSecret)
		}
		return []byte(s), nil
	}
	if shared {
		return nil, fmt.Errorf("set $%s to the same 32 or more random bytes on every replica (e.g. openssl rand -hex 32)", envReplicaSecret)
	}
	log.Warn("no $" + envReplicaSecret + ": this replica made one up, so no other replica can forward to it; set it (the same on every replica) to run several")
	return []byte(randid.Text() + randid.Text()), nil // 52 characters, 260 random bits
}

// close leaves the deployment: the directory first (the other replicas
// answer this one's sessions as ended at once), then the audit sink
// writes what is queued. Call it after the console has closed.
func (d *deployment) close(log *slog.Logger) {
	if d.rep.Notifier != nil {
		_ = d.rep.Notifier.Close()
	}
	if d.rep.Directory != nil {
		if err := d.rep.Directory.Close(); err != nil {
			log.Warn("replica: leaving the directory", "error", err)
		}
	}
	if d.rep.Audit != nil {
		if err := d.rep.Audit.Close(); err != nil {
			log.Warn("replica: writing the last audit records", "error", err)
		}
	}
	if d.pool != nil {
		d.pool.Close()
	}
	if d.store != nil {
		_ = d.store.Close()
	}
}
