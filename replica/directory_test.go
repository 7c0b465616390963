package replica_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/replica"
)

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	pool, _ := migrated(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- replica.Migrate(context.Background(), pool) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var versions int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM agentsurface_schema`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != 1 {
		t.Fatalf("schema versions recorded: %d, want 1", versions)
	}
}

func TestOpenDirectoryRefusesBadOptions(t *testing.T) {
	pool, _ := migrated(t)
	for name, c := range map[string]struct {
		addr   string
		secret []byte
	}{
		"short secret": {"http://127.0.0.1:1", []byte("short")},
		"no addr":      {"", secret},
		"addr path":    {"http://127.0.0.1:1/base", secret},
		"addr scheme":  {"127.0.0.1:1", secret},
		"addr user":    {"http://u:p@127.0.0.1:1", secret},
	} {
		if d, err := replica.OpenDirectory(context.Background(), pool, c.addr, c.secret, nil); err == nil {
			d.Close()
			t.Errorf("%s: OpenDirectory succeeded", name)
		}
	}
	// Nil options mean the defaults.
	d, err := replica.OpenDirectory(context.Background(), pool, "http://127.0.0.1:1", secret, nil)
	if err != nil {
		t.Fatalf("nil options: %v", err)
	}
	if host, _ := os.Hostname(); d.Name() != host || !strings.HasPrefix(d.ID(), "r_") || len(d.ID()) != 2+26 {
		t.Fatalf("defaults: name %q, id %q", d.Name(), d.ID())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestClaimOwnerRelease(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{lease: time.Second})
	b := startNode(t, url, "b", nodeOptions{lease: time.Second})
	ctx := context.Background()
	tok := randomToken()
	if err := a.dir.Claim(ctx, tok, tok+"-join", tok); err != nil { // a token twice is one key
		t.Fatal(err)
	}
	o, err := a.dir.Owner(ctx, tok)
	if err != nil || !o.Local || o.ID != a.dir.ID() {
		t.Fatalf("owner seen by a: %+v, %v", o, err)
	}
	for _, k := range []string{tok, tok + "-join"} {
		o, err = b.dir.Owner(ctx, k)
		if err != nil || o.Local || o.ID != a.dir.ID() || o.Addr != a.addr || o.Name != "a" {
			t.Fatalf("owner seen by b: %+v, %v", o, err)
		}
	}
	if _, err := b.dir.Owner(ctx, randomToken()); !errors.Is(err, replica.ErrNoOwner) {
		t.Fatalf("unknown token: %v, want ErrNoOwner", err)
	}
	// Another live replica cannot take a claimed session.
	if err := b.dir.Claim(ctx, randomToken(), tok); !errors.Is(err, replica.ErrClaimed) {
		t.Fatalf("claim of a's session by b: %v, want ErrClaimed", err)
	}
	a.dir.Release(tok, tok+"-join")
	if _, err := a.dir.Owner(ctx, tok); !errors.Is(err, replica.ErrNoOwner) {
		t.Fatalf("released, seen by a: %v, want ErrNoOwner at once", err)
	}
	// The rows go at a's next renewal.
	pool := openPool(t, url)
	eventually(t, 30*time.Second, "released rows deleted", func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM agentsurface_sessions`).Scan(&n)
		return n == 0
	})
}

// The directory stores a keyed hash of each token: not the token, not
// its plain SHA-256.
func TestDirectoryStoresNoToken(t *testing.T) {
	pool, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{})
	tok := randomToken()
	if err := a.dir.Claim(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	var k []byte
	if err := pool.QueryRow(context.Background(), `SELECT key FROM agentsurface_sessions`).Scan(&k); err != nil {
		t.Fatal(err)
	}
	plain := sha256.Sum256([]byte(tok))
	if bytes.Contains(k, []byte(tok)) || bytes.Equal(k, plain[:]) || !bytes.Equal(k, a.dir.KeyOf(tok)) {
		t.Fatalf("stored key %x reveals the token or is not the keyed hash", k)
	}
	var dump string
	if err := pool.QueryRow(context.Background(),
		`SELECT string_agg(t::text, ' ') FROM (SELECT * FROM agentsurface_sessions) t`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains([]byte(dump), []byte(tok)) {
		t.Fatal("the session table holds the token")
	}
}

// A replica that stops dead loses its sessions when its lease runs out;
// another may then claim them.
func TestDeadReplicaLosesSessionsWithinLease(t *testing.T) {
	_, url := migrated(t)
	const lease = time.Second
	a := startNode(t, url, "a", nodeOptions{lease: lease})
	b := startNode(t, url, "b", nodeOptions{lease: lease})
	tok := randomToken()
	if err := a.dir.Claim(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	a.crash()
	died := time.Now()
	eventually(t, 3*lease, "a's session ends", func() bool {
		_, err := b.dir.Owner(context.Background(), tok)
		return errors.Is(err, replica.ErrNoOwner)
	})
	if since := time.Since(died); since < lease/2 {
		t.Fatalf("session ended %v after the crash, before the lease could run out", since)
	}
	if err := b.dir.Claim(context.Background(), tok); err != nil {
		t.Fatalf("claim of a dead replica's key: %v", err)
	}
}

// A replica whose lease ran out (here: its row aged by hand, as a long
// Postgres outage would) says so, forgets its sessions and registers
// again under a new id.
func TestLeaseLostIsReportedAndRecovered(t *testing.T) {
	pool, url := migrated(t)
	lost := make(chan struct{}, 1)
	a := startNode(t, url, "a", nodeOptions{lease: time.Second, onLeaseLost: func() { lost <- struct{}{} }})
	tok := randomToken()
	if err := a.dir.Claim(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	old := a.dir.ID()
	if _, err := pool.Exec(context.Background(),
		`UPDATE agentsurface_replicas SET expires_at = now() - interval '1 second' WHERE id = $1`, old); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("OnLeaseLost not called")
	}
	if _, err := a.dir.Owner(context.Background(), tok); !errors.Is(err, replica.ErrNoOwner) {
		t.Fatalf("session of the lost lease: %v, want ErrNoOwner", err)
	}
	eventually(t, 30*time.Second, "registered again", func() bool { return a.dir.ID() != old })
	eventually(t, 30*time.Second, "claims work again", func() bool {
		return a.dir.Claim(context.Background(), randomToken()) == nil
	})
	if got := a.dir.Stats().LeasesLost; got != 1 {
		t.Fatalf("LeasesLost = %d, want 1", got)
	}
}

// Close removes the replica: its sessions end at once for the others,
// without waiting for the lease.
func TestCloseEndsSessionsAtOnce(t *testing.T) {
	_, url := migrated(t)
	a := startNode(t, url, "a", nodeOptions{lease: time.Hour})
	b := startNode(t, url, "b", nodeOptions{lease: time.Hour})
	tok := randomToken()
	if err := a.dir.Claim(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	a.stop()
	if _, err := b.dir.Owner(context.Background(), tok); !errors.Is(err, replica.ErrNoOwner) {
		t.Fatalf("after a closed: %v, want ErrNoOwner", err)
	}
	if err := a.dir.Claim(context.Background(), randomToken()); !errors.Is(err, replica.ErrClosed) {
		t.Fatalf("claim on a closed directory: %v", err)
	}
}
