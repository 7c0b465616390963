package replica_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A replica of an application whose sessions are named by a cookie (the
// page) or a bearer token (MCP clients): the directory knows which
// replica owns each session, Forward sends every request to it, the
// audit of every replica goes to one table, and a Notifier tells the
// other replicas about domain writes.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := replica.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	var sessions *sessionStore // the application's own
	dir, err := replica.OpenDirectory(ctx, pool,
		"http://"+os.Getenv("POD_IP")+":8080", // where the other replicas reach this one
		[]byte(os.Getenv("REPLICA_SECRET")),   // 32+ bytes, the same on every replica
		&replica.Options{OnLeaseLost: func() { sessions.endAll() }})
	if err != nil {
		log.Fatal(err)
	}
	defer dir.Close()
	// Durable: a call's answer leaves once its audit record is committed.
	audit := replica.NewAuditSink(pool, &replica.AuditOptions{Replica: os.Getenv("POD_NAME"), Durable: true})
	defer audit.Close()
	changes, err := replica.NewNotifier(ctx, pool, "devices_changed",
		func(replica.Notification) { sessions.refreshAll() }, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer changes.Close()

	// Creating a session: claim its tokens before handing them out, and
	// give its registry its own view of the audit sink.
	newSession := func(ctx context.Context, cookie, bearer string) (*surface.Registry, error) {
		if err := dir.Claim(ctx, cookie, bearer); err != nil {
			return nil, err // 503 for the visitor: try again
		}
		return surface.New(&surface.Options{Audit: audit.For(cookie[:8])}), nil
	}
	_ = newSession
	// Ending one: dir.Release(cookie, bearer).
	// After a domain write: changes.Notify(ctx, "") and refresh the local sessions.

	token := func(r *http.Request) string {
		if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			return t // an MCP client
		}
		if c, err := r.Cookie("session"); err == nil {
			return c.Value // the page
		}
		return "" // a first visit: served here, which then owns the new session
	}
	mux := http.NewServeMux()
	mux.Handle("/", dir.Forward(sessions, token, nil))
	// The balancer's readiness probe: 503 from Drain on, so that it stops
	// sending requests here before the replica stops.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := dir.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Addr: ":8080", Handler: mux}
	log.Fatal(srv.ListenAndServe())
}

type sessionStore struct{ http.Handler }

func (*sessionStore) endAll()     {}
func (*sessionStore) refreshAll() {}
