package pgdemo_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/cmd/agentsurface/internal/pgdemo"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/internal/pgtest"
	"github.com/agentsurface/agentsurface/webhost"
)

var pg pgtest.Lazy

func TestMain(m *testing.M) { pgtest.Main(m, &pg) }

var secret = []byte(strings.Repeat("s", 32))

// Open migrates and seeds the domain on PostgreSQL, and the console's
// Host joins the deployment with its Replicas: the replica gets an id in
// the directory, and the devices are there. (The command's tests run the
// binary built with the postgres tag: several replicas, the scripted
// task, restarts.)
func TestOpenJoinsTheDeployment(t *testing.T) {
	ctx := context.Background()
	d, err := pgdemo.Open(ctx, pgdemo.Config{URL: pg.Database(t), Addr: "http://127.0.0.1:1", Secret: secret,
		Name: "solo", Lease: 5 * time.Second, DurableAudit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	devices, err := d.Store.List(ctx, domain.User{ID: "adam", Roles: []string{domain.RoleAdmin}}, domain.Filter{})
	if err != nil || len(devices) != 12 {
		t.Fatalf("the seeded devices: %d %v", len(devices), err)
	}
	if id := d.ReplicaID(); id != "" {
		t.Fatalf("a replica id before the Host started: %q", id)
	}
	app, err := console.New(console.Options{Store: d.Store, Host: webhost.Options{Logger: slog.New(slog.DiscardHandler), Replicas: d.Replicas}})
	if err != nil {
		t.Fatal(err)
	}
	if d.ReplicaID() == "" {
		t.Error("no replica id once the Host started")
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
}

// Open refuses a short secret, and a malformed URL without quoting its
// password.
func TestOpenRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	if _, err := pgdemo.Open(ctx, pgdemo.Config{URL: "postgres://u@127.0.0.1:1/db", Addr: "http://127.0.0.1:1", Secret: secret[:31]}); err == nil || !strings.Contains(err.Error(), "32 bytes") {
		t.Errorf("a 31-byte secret: %v", err)
	}
	_, err := pgdemo.Open(ctx, pgdemo.Config{URL: "postgres://u:hunter2@127.0.0.1:notaport/db", Addr: "http://127.0.0.1:1", Secret: secret})
	if !errors.Is(err, domain.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a malformed URL: %v", err)
	}
}
