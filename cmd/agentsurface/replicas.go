package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/agentsurface/agentsurface/webhost"
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

// deployment is what --postgres sets up on one Postgres database (in a
// build with the postgres tag: package pgdemo): the devices domain, and
// this replica's part in the deployment (its session directory, audit
// writer and change notifier), which the console's Host starts and stops.
type deployment struct {
	store     *domain.Store
	rep       webhost.Replicas
	addr      string        // where the other replicas reach this one
	id        func() string // this replica's id, once the Host has started rep
	closeFunc func()
}

// openDeployment connects to f.postgres and prepares this replica's
// part: the console's Host joins the replicas when it starts. ln is the
// demo's listener: by default the other replicas reach this one at its
// address. A build without the postgres tag fails with
// errWithoutPostgres.
func openDeployment(ctx context.Context, f replicaFlags, ln net.Listener, log *slog.Logger) (*deployment, error) {
	if openPostgres == nil {
		return nil, errWithoutPostgres
	}
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
	return openPostgres(ctx, f, addr, secret, log)
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

// close closes the database connections; the console's Host has left
// the deployment (Close) already.
func (d *deployment) close() { d.closeFunc() }
