//go:build postgres

package main

import (
	"context"
	"log/slog"

	"github.com/agentsurface/agentsurface/cmd/agentsurface/internal/pgdemo"
)

// The postgres build tag plugs package pgdemo in (see features.go).
func init() {
	openPostgres = func(ctx context.Context, f replicaFlags, addr string, secret []byte, log *slog.Logger) (*deployment, error) {
		d, err := pgdemo.Open(ctx, pgdemo.Config{URL: f.postgres, Addr: addr, Secret: secret, Name: f.name,
			Lease: f.lease, DurableAudit: f.durableAudit, Logger: log})
		if err != nil {
			return nil, err
		}
		return &deployment{store: d.Store, rep: d.Replicas, addr: addr, id: d.ReplicaID, closeFunc: d.Close}, nil
	}
}
