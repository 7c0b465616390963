// Package pgtest gives tests a real PostgreSQL server.
//
// A test package declares a [Lazy] and runs its tests with [Main]; its
// tests call Lazy.Database. (A package that needs the server itself calls
// [New].) With AGENTSURFACE_POSTGRES_URL
// set (a superuser's URL, as CI exports it), the tests use that server;
// otherwise New starts a private server from the PostgreSQL binaries
// installed on the machine (Debian: /usr/lib/postgresql/N/bin; another
// directory through AGENTSURFACE_POSTGRES_BIN) in a temporary directory,
// on 127.0.0.1 and a free port, as the postgres user when the tests run as
// root (PostgreSQL refuses to run as root). Only where neither exists do
// the tests that need it skip, saying why.
//
// Every test gets a database of its own ([Cluster.Database]), dropped when
// it ends. A test that stops and restarts the server starts one of its
// own with [StartServer].
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/internal/randid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// EnvURL names the environment variable holding the URL of a server to
// use instead of starting one.
const EnvURL = "AGENTSURFACE_POSTGRES_URL"

// EnvBin names the environment variable holding the directory of the
// PostgreSQL server binaries (initdb, pg_ctl), when not Debian's.
const EnvBin = "AGENTSURFACE_POSTGRES_BIN"

// Cluster is the server a test package uses.
type Cluster struct {
	admin  string  // a superuser's URL, database postgres
	srv    *Server // nil when the server is external
	reason string  // why there is no server, when admin is ""
}

// New returns the package's server: the one AGENTSURFACE_POSTGRES_URL
// names, or a private one it starts. When there is none, the Cluster
// records why and its Database skips the tests that call it.
func New() *Cluster {
	if u := os.Getenv(EnvURL); u != "" {
		return &Cluster{admin: u}
	}
	srv, err := startServer(ServerOptions{})
	if err != nil {
		return &Cluster{reason: err.Error()}
	}
	return &Cluster{admin: srv.URL("postgres"), srv: srv}
}

// Close stops the server New started, if it started one.
func (c *Cluster) Close() {
	if c.srv != nil {
		c.srv.Close()
	}
}

// Available reports whether there is a server, and if not, why.
func (c *Cluster) Available() (ok bool, reason string) { return c.admin != "", c.reason }

// Database creates an empty database for tb, dropped when tb ends, and
// returns its URL. It skips tb, saying why, when there is no server.
func (c *Cluster) Database(tb testing.TB) string {
	tb.Helper()
	if c.admin == "" {
		tb.Skipf("no PostgreSQL server: %s", c.reason)
	}
	return createDatabase(tb, c.admin)
}

func createDatabase(tb testing.TB, admin string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("pgtest: connect to %s: %v", redact(admin), err)
	}
	defer conn.Close(ctx)
	name := "agentsurface_test_" + strings.ToLower(randid.Text()) // unquoted identifiers fold to lower case
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			tb.Logf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return withDatabase(admin, cfg.Database, name)
}

// withDatabase returns u naming database db instead of old.
func withDatabase(u, old, db string) string {
	if strings.Contains(u, "://") {
		head, query, _ := strings.Cut(u, "?")
		if i := strings.LastIndex(head, "/"); i > strings.Index(head, "://")+2 {
			head = head[:i]
		}
		if query != "" {
			return head + "/" + db + "?" + query
		}
		return head + "/" + db
	}
	// keyword/value form
	if old != "" && strings.Contains(u, "dbname=") {
		return strings.Replace(u, "dbname="+old, "dbname="+db, 1)
	}
	return u + " dbname=" + db
}

// redact hides a password in a URL for messages.
func redact(u string) string {
	if cfg, err := pgx.ParseConfig(u); err == nil {
		return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	}
	return "(unparsable URL)"
}

// Server is a private PostgreSQL server: a data directory and a
// postmaster on 127.0.0.1, which a test may stop and start again.
type Server struct {
	bin  string // directory of initdb and pg_ctl
	dir  string // holds data/ and log
	port int
	as   *user.User // run the binaries as this user (root's tests), or nil
	opts ServerOptions
}

// ServerOptions configure a server [StartServer] starts. The zero value
// (or nil) is valid.
type ServerOptions struct {
	// Flush makes the server flush its write-ahead log to disk at every
	// commit (fsync and full_page_writes on, PostgreSQL's defaults), as a
	// production server does: for benchmarks of what a commit costs.
	// Default false: the server never flushes, which keeps tests fast;
	// its commits still reach the operating system, so a crash stop of
	// the server loses none.
	Flush bool
}

// StartServer starts a private server for tb, stopped and removed when tb
// ends. It skips tb, saying why, when no PostgreSQL binaries are
// installed.
func StartServer(tb testing.TB, opts *ServerOptions) *Server {
	tb.Helper()
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	srv, err := startServer(o)
	if err != nil {
		tb.Skipf("cannot start a PostgreSQL server: %v", err)
	}
	tb.Cleanup(srv.Close)
	return srv
}

// Database creates an empty database on s for tb (see Cluster.Database).
func (s *Server) Database(tb testing.TB) string {
	tb.Helper()
	return createDatabase(tb, s.URL("postgres"))
}

// URL returns the URL of database db on s, as the superuser postgres.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Stop stops the server at once (pg_ctl -m immediate), as a crash would:
// connections break, clients see errors until Start.
func (s *Server) Stop() error { return s.pgctl("stop", "-m", "immediate") }

// Start starts the stopped server again, on the same port.
func (s *Server) Start() error {
	return s.pgctl("start", "-l", filepath.Join(s.dir, "log"), "-o", s.serverOptions())
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	_ = s.Stop()
	_ = os.RemoveAll(s.dir)
}

func (s *Server) serverOptions() string {
	opts := []string{
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=''",
		"-c", "max_connections=200",
	}
	if !s.opts.Flush {
		// No flushes; commits still reach the OS, so a crash stop keeps them.
		opts = append(opts, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	return strings.Join(opts, " ")
}

func (s *Server) pgctl(args ...string) error {
	args = append([]string{"-D", filepath.Join(s.dir, "data"), "-w", "-t", "60"}, args...)
	out, err := s.command(filepath.Join(s.bin, "pg_ctl"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", args[len(args)-1], err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	if s.as != nil {
		return exec.Command("runuser", append([]string{"-u", s.as.Username, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// startServer runs initdb into a new temporary directory and starts the
// server.
func startServer(opts ServerOptions) (*Server, error) {
	bin, err := binaries()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, opts: opts}
	if os.Geteuid() == 0 {
		if s.as, err = user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user to run the server as: %v", err)
		}
	}
	if s.dir, err = os.MkdirTemp("", "agentsurface-pg-"); err != nil {
		return nil, err
	}
	if s.as != nil {
		uid, _ := strconv.Atoi(s.as.Uid)
		gid, _ := strconv.Atoi(s.as.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
	out, err := s.command(filepath.Join(bin, "initdb"), "-D", filepath.Join(s.dir, "data"),
		"-U", "postgres", "--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C").CombinedOutput()
	if err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, strings.TrimSpace(string(out)))
	}
	for range 5 { // a free port may be taken between the probe and the start
		if s.port, err = freePort(); err != nil {
			break
		}
		if err = s.Start(); err == nil {
			s.watch()
			return s, nil
		}
	}
	os.RemoveAll(s.dir)
	return nil, err
}

// watch starts a watchdog process that stops the server and removes its
// directory once this process has gone, however it went: a test binary
// that panics or times out skips its cleanups, and the server would
// outlive it. It waits two seconds more, for a pg_ctl start the process
// left running to finish.
func (s *Server) watch() {
	if _, err := os.Stat("/proc/self"); err != nil {
		return // no /proc to watch this process by
	}
	stop := s.command(filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "stop")
	quoted := make([]string, len(stop.Args))
	for i, a := range stop.Args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := fmt.Sprintf("while [ -d /proc/%d ]; do sleep 1; done; sleep 2; %s >/dev/null 2>&1; rm -rf '%s'",
		os.Getpid(), strings.Join(quoted, " "), s.dir)
	w := exec.Command("sh", "-c", script)
	if w.Start() == nil {
		_ = w.Process.Release()
	}
}

// binaries returns the directory of initdb and pg_ctl.
func binaries() (string, error) {
	if d := os.Getenv(EnvBin); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { // newest major version first
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server is installed (no initdb/pg_ctl under /usr/lib/postgresql/*/bin or on PATH; " +
		"Debian: apt-get install postgresql) and " + EnvURL + " is not set")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Lazy is a test package's server, started by the first test that asks
// for a database, so that the package's other tests never wait for it.
// Its zero value is ready; run the package with [Main].
type Lazy struct {
	once sync.Once
	c    *Cluster
}

// Database is [Cluster.Database] on the package's server, started (or
// found) on first use. It skips tb, saying why, when there is none.
func (l *Lazy) Database(tb testing.TB) string {
	tb.Helper()
	l.once.Do(func() { l.c = New() })
	return l.c.Database(tb)
}

// Main runs a test package that uses l: it runs the tests, stops the
// server if one was started, and when the tests passed checks that they
// leaked no goroutine (goleak); then it exits with their status. Call it
// from TestMain.
func Main(m *testing.M, l *Lazy) {
	code := m.Run()
	l.once.Do(func() {}) // no server from now on
	if l.c != nil {
		if ok, reason := l.c.Available(); !ok {
			fmt.Fprintln(os.Stderr, "no PostgreSQL server; the tests that need one were skipped:", reason)
		}
		l.c.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
