package replica_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// waitFor bounds the waits of the roles test: a failure bound, never
// what it waits for.
const waitFor = 30 * time.Second

// documentedSQL returns the SQL blocks of docs/deploy.md, in order, with
// the role and database names it uses (console, console_owner,
// console_app) made unique to this test: roles belong to the whole
// server, which other tests share.
func documentedSQL(t *testing.T) (blocks [][]string, names func(string) string) {
	t.Helper()
	b, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(randid.Text()[:8])
	names = func(n string) string { return strings.Replace(n, "console", "console_"+suffix, 1) }
	ident := regexp.MustCompile(`\bconsole(_owner|_app)?\b`)
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		var stmts []string
		for _, s := range strings.Split(m[1], ";") {
			var lines []string
			for _, l := range strings.Split(s, "\n") {
				if l, _, _ = strings.Cut(l, "--"); strings.TrimSpace(l) != "" {
					lines = append(lines, l)
				}
			}
			if s := strings.TrimSpace(strings.Join(lines, "\n")); s != "" {
				stmts = append(stmts, ident.ReplaceAllStringFunc(s, names))
			}
		}
		blocks = append(blocks, stmts)
	}
	if len(blocks) != 3 {
		t.Fatalf("docs/deploy.md has %d sql blocks; this test runs three (one role; two roles; their grants): update it with the docs", len(blocks))
	}
	return blocks, names
}

// execAll runs stmts one by one (CREATE DATABASE cannot run in a
// transaction, as a multi-statement string would).
func execAll(t *testing.T, conn interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, stmts []string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// admin connects as the tests' superuser, to a database of t's own.
func admin(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	url := pg.Database(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, url
}

// dropLater drops the database and the roles when t ends (registered
// before they exist: cleanups run last first, after the pools closed).
func dropLater(t *testing.T, url, db string, roles ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop the test's database and roles: %v", err)
			return
		}
		defer conn.Close(ctx)
		for _, s := range append([]string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)"}, func() (d []string) {
			for _, r := range roles {
				d = append(d, "DROP ROLE IF EXISTS "+r)
			}
			return d
		}()...) {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Errorf("%s: %v", s, err)
			}
		}
	})
}

// poolAs opens a pool on database db as role, from the superuser's url.
func poolAs(t *testing.T, url, role, db string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password, cfg.ConnConfig.Database = role, "change-me", db
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var who string
	var super, createDB, createRole bool
	if err := pool.QueryRow(context.Background(), `SELECT current_user, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user`).
		Scan(&who, &super, &createDB, &createRole); err != nil {
		t.Fatal(err)
	}
	if who != role || super || createDB || createRole {
		t.Fatalf("connected as %s (superuser %v, createdb %v, createrole %v), want %s with none of these", who, super, createDB, createRole, role)
	}
	return pool
}

// warnings records the records at Warn and above of a logger.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		w.mu.Lock()
		w.list = append(w.list, b.String())
		w.mu.Unlock()
	}
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.list {
		t.Errorf("logged: %s", s)
	}
}

// asReplicas does, on pools connected as the replicas' role, everything a
// replica does in Postgres: two directories register, one claims a
// session's tokens and the other finds it, a released token's row goes
// at a renewal, a durable audit record is committed, a notification
// reaches another replica, and a directory leaves and the other sees it.
// superuser reads the tables to check.
func asReplicas(t *testing.T, a, b *pgxpool.Pool, superuser *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	logs := &warnings{}
	lost := func() { t.Error("a directory lost its lease") }
	opts := func(name string) *replica.Options {
		// The default lease: a busy machine may delay a renewal by
		// seconds, and a lost lease fails the test.
		return &replica.Options{Name: name, Timeout: 5 * time.Second, Logger: slog.New(logs), OnLeaseLost: lost}
	}
	dirA, err := replica.OpenDirectory(ctx, a, "http://127.0.0.1:1", secret, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer dirA.Close()
	dirB, err := replica.OpenDirectory(ctx, b, "http://127.0.0.1:2", secret, opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer dirB.Close()
	if err := dirA.Claim(ctx, "cookie", "bearer"); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if o, err := dirB.Owner(ctx, "cookie"); err != nil || o.Name != "a" {
		t.Fatalf("b looks up a's session: %+v, %v", o, err)
	}
	dirA.Release("bearer")
	eventually(t, waitFor, "a's renewal deletes the released token's row", func() bool {
		var n int
		if err := superuser.QueryRow(ctx, `SELECT count(*) FROM agentsurface_sessions WHERE key = $1`, dirA.KeyOf("bearer")).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})

	sink := replica.NewAuditSink(a, &replica.AuditOptions{Replica: "a", Durable: true, Timeout: waitFor, Logger: slog.New(logs)})
	err = sink.For("s_1").Record(ctx, surface.AuditEvent{Type: surface.AuditInvocationSettled, At: time.Now(), CapabilityID: "view:demo.counter.add"})
	if cerr := sink.Close(); err != nil || cerr != nil {
		t.Fatalf("a durable audit record: %v, close: %v", err, cerr)
	}
	var n int
	if err := superuser.QueryRow(ctx, `SELECT count(*) FROM agentsurface_audit WHERE replica = 'a' AND session = 's_1'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d audit records (%v), want 1", n, err)
	}

	got := make(chan replica.Notification, 8)
	na, err := replica.NewNotifier(ctx, a, "roles_test", func(n replica.Notification) { got <- n }, &replica.NotifierOptions{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer na.Close()
	nb, err := replica.NewNotifier(ctx, b, "roles_test", func(replica.Notification) {}, &replica.NotifierOptions{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	if err := nb.Notify(ctx, "devices"); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n.Payload != "devices" {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(waitFor):
		t.Fatal("the notification did not arrive")
	}

	if err := dirA.Close(); err != nil {
		t.Fatalf("a leaves: %v", err)
	}
	eventually(t, waitFor, "b sees a leave", func() bool {
		_, err := dirB.Owner(ctx, "cookie")
		return errors.Is(err, replica.ErrNoOwner)
	})
	if err := dirB.Close(); err != nil {
		t.Fatalf("b leaves: %v", err)
	}
	logs.check(t)
}

// The database set-ups docs/deploy.md gives, run as written (the names
// made unique): no role is a superuser or may create databases or roles,
// and each has the privileges the replicas need.
func TestDocumentedRoles(t *testing.T) {
	blocks, names := documentedSQL(t)
	ctx := context.Background()

	// One role that owns its database: it migrates, and does all the rest.
	t.Run("owner", func(t *testing.T) {
		conn, url := admin(t)
		role, db := names("console"), names("console")
		dropLater(t, url, db, role)
		execAll(t, conn, blocks[0])
		a, b := poolAs(t, url, role, db), poolAs(t, url, role, db)
		if err := replica.Migrate(ctx, a); err != nil {
			t.Fatalf("Migrate as %s: %v", role, err)
		}
		asReplicas(t, a, b, superuserPool(t, url, db))
	})

	// A migration role owns the tables; the replicas' role does all the
	// rest, and nothing else.
	t.Run("migration and runtime roles", func(t *testing.T) {
		conn, url := admin(t)
		owner, app, db := names("console_owner"), names("console_app"), names("console")
		dropLater(t, url, db, app, owner)
		execAll(t, conn, blocks[1])
		op := poolAs(t, url, owner, db)
		if err := replica.Migrate(ctx, op); err != nil {
			t.Fatalf("Migrate as %s: %v", owner, err)
		}
		execAll(t, op, blocks[2])
		a, b := poolAs(t, url, app, db), poolAs(t, url, app, db)
		asReplicas(t, a, b, superuserPool(t, url, db))

		denied := func(what string, err error) {
			t.Helper()
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "42501" { // insufficient_privilege
				t.Errorf("%s as %s: %v, want permission denied", what, app, err)
			}
		}
		_, err := a.Exec(ctx, `SELECT count(*) FROM agentsurface_audit`)
		denied("read the audit trail", err)
		_, err = a.Exec(ctx, `UPDATE agentsurface_audit SET reason = 'x'`)
		denied("change the audit trail", err)
		_, err = a.Exec(ctx, `DELETE FROM agentsurface_audit`)
		denied("delete the audit trail", err)
		_, err = a.Exec(ctx, `DROP TABLE agentsurface_sessions`)
		denied("drop a table", err)
		var version int
		if err := a.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if version < 150000 {
			t.Logf("PostgreSQL %d lets every role create tables in schema public; deploy.md says to revoke it", version)
			return
		}
		_, err = a.Exec(ctx, `CREATE TABLE x (y int)`)
		denied("create a table", err)
		denied("Migrate", replica.Migrate(ctx, a))
	})
}

// superuserPool opens a pool on database db as the superuser, to check what
// the roles wrote.
func superuserPool(t *testing.T, url, db string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Database = db
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
