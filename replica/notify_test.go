package replica_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/internal/pgtest"
	"github.com/agentsurface/agentsurface/replica"
)

// inbox collects notifications.
type inbox struct {
	mu  sync.Mutex
	got []replica.Notification
}

func (b *inbox) add(n replica.Notification) {
	b.mu.Lock()
	b.got = append(b.got, n)
	b.mu.Unlock()
}

func (b *inbox) list() []replica.Notification {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]replica.Notification(nil), b.got...)
}

func (b *inbox) payloads() string {
	var p []string
	for _, n := range b.list() {
		if n.Resync {
			p = append(p, "<resync>")
		} else {
			p = append(p, n.Payload)
		}
	}
	return strings.Join(p, ",")
}

// A notification reaches every other replica, in order, not its sender;
// after Postgres restarts, the listeners reconnect, say they may have
// missed some (Resync), and receive again.
func TestNotifierAcrossReplicasAndRestart(t *testing.T) {
	srv := pgtest.StartServer(t, nil)
	url := srv.Database(t)
	ctx := context.Background()
	boxes := make([]*inbox, 3)
	ns := make([]*replica.Notifier, 3)
	for i := range ns {
		boxes[i] = new(inbox)
		var err error
		ns[i], err = replica.NewNotifier(ctx, openPool(t, url), "devices_changed", boxes[i].add,
			&replica.NotifierOptions{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer ns[i].Close()
	}
	for _, p := range []string{"d1", "d2", "d3"} {
		if err := ns[0].Notify(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 3; i++ {
		eventually(t, 30*time.Second, "notifications delivered", func() bool { return boxes[i].payloads() == "d1,d2,d3" })
	}
	if got := boxes[0].payloads(); got != "" {
		t.Fatalf("the sender received its own notifications: %q", got)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := ns[1].Notify(ctx, "lost"); err == nil {
		t.Fatal("Notify succeeded with Postgres down")
	} else if time.Since(start) > 3*time.Second {
		t.Fatalf("Notify with Postgres down took %v", time.Since(start))
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for _, b := range boxes {
		eventually(t, 15*time.Second, "resync after the restart", func() bool { return strings.HasSuffix(b.payloads(), "<resync>") })
	}
	eventually(t, 30*time.Second, "notifications flow again", func() bool {
		if ns[2].Notify(ctx, "after") != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
		return strings.HasSuffix(boxes[0].payloads(), "after") && strings.HasSuffix(boxes[1].payloads(), "after")
	})
}

func TestNotifierRefusesBadInput(t *testing.T) {
	pool, _ := migrated(t)
	ctx := context.Background()
	if _, err := replica.NewNotifier(ctx, pool, "Bad-Name", func(replica.Notification) {}, nil); err == nil {
		t.Fatal("bad channel name accepted")
	}
	if _, err := replica.NewNotifier(ctx, pool, "ok", nil, nil); err == nil {
		t.Fatal("missing onNotify accepted")
	}
	n, err := replica.NewNotifier(ctx, pool, "ok", func(replica.Notification) {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Notify(ctx, strings.Repeat("x", 8000)); err == nil {
		t.Fatal("oversized payload accepted")
	}
}
