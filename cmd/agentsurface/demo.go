package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/chat"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	modversion "github.com/agentsurface/agentsurface/internal/version"
	"github.com/agentsurface/agentsurface/webhost"
)

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (with --scripted: a free loopback port unless set, so that it runs beside a demo)")
	allowHosts := fs.String("allow-host", "", "comma-separated host names the console may be reached by besides the loopback ones (a request naming another host is refused, against DNS rebinding); when --addr is not a loopback address its addresses are allowed too")
	db := fs.String("db", defaultDB(), "SQLite database file, created and seeded on first use (with --scripted: a fresh temporary one unless set)")
	reset := fs.Bool("reset", false, "delete the database first, for a fresh seed")
	scripted := fs.Bool("scripted", false, "play the scripted agent over MCP, print its transcript and exit (0 if every step went as expected)")
	approve := fs.Bool("approve", false, "with --scripted: decide headless, as you would on the approve page of the link the agent hands you (approve the task, with a grant for its devices; deny what it asks beyond), instead of waiting for a click in the browser")
	modelURL := fs.String("model-url", "", "OpenAI-compatible chat-completions endpoint for the page's agent console, e.g. http://localhost:11434/v1/ (default: the scripted agent)")
	model := fs.String("model", "gpt-4o-mini", "model name for --model-url")
	modelTimeout := fs.Duration("model-timeout", chat.DefaultRequestTimeout, "give up on a model request that has not answered after this long (the page's Stop ends a run at once)")
	var rf replicaFlags
	fs.StringVar(&rf.postgres, "postgres", "", "PostgreSQL URL (postgres://user:pass@host/db): keep the devices, the session directory and the audit there instead of SQLite, so that several replicas can serve the console behind one load balancer (see docs/deploy.md)")
	fs.StringVar(&rf.addr, "replica-addr", "", "with --postgres: the base URL at which the other replicas reach this one, e.g. http://10.0.0.5:8080 (default: the --addr it listens on); needs $"+envReplicaSecret)
	fs.StringVar(&rf.name, "replica-name", "", "with --postgres: this replica's name in logs and in the audit table (default: the host name)")
	fs.DurationVar(&rf.lease, "replica-lease", 15*time.Second, "with --postgres: how long this replica's sessions outlive its last renewal; after a crash its sessions end within it")
	newToken := fs.Bool("new-token", false, "make a new printed session, with a new link and MCP token, instead of the one kept in the database from an earlier start (whose token, link and pages then stop working)")
	drain := fs.Duration("drain", 0, "on SIGTERM or Ctrl+C, answer /readyz with 503 for this long before stopping, so that a load balancer stops sending new requests first (with --postgres: 5s unless set)")
	fs.BoolVar(&rf.durableAudit, "audit-durable", true, "with --postgres: answer a call only once its audit record is committed, so that a crash loses none (false: write the audit in the background; a crash loses the last records)")
	publicURL := fs.String("public-url", "", "the base URL users reach the console at, printed in its links and the approve links it hands to agents (default: the address it listens on; approve links then use the address each agent connected to); behind a load balancer, the balancer's")
	logFormat := fs.String("log-format", "text", "format of the diagnostics on standard error: text (key=value) or json (one object per line, for a log collector)")
	logLevel := fs.String("log-level", "info", "log level of the diagnostics on standard error: debug, info, warn or error (with --scripted: warn unless set, so that the transcript reads cleanly)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentsurface demo [flags]\n\nRuns the devices console: a web page whose live state an AI agent operates\nthrough agentsurface, over MCP or in the page's agent console, with you\napproving what matters. The model's API key is read from $OPENAI_API_KEY\n($OPENAI_ORG_ID and $OPENAI_PROJECT_ID, if set, are sent too).\n\n%s\nFlags:\n", demoFeatures())
		fs.PrintDefaults()
	}
	pos, code, done := parse(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "agentsurface demo: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	replicaOnly := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "replica-addr", "replica-name", "replica-lease", "audit-durable":
			replicaOnly = f.Name
		}
	})
	if rf.postgres == "" && replicaOnly != "" {
		fmt.Fprintf(stderr, "agentsurface demo: --%s needs --postgres\n", replicaOnly)
		return exitUsage
	}
	if rf.postgres != "" && *reset {
		fmt.Fprintln(stderr, "agentsurface demo: --reset applies to the SQLite database, not to --postgres")
		return exitUsage
	}
	if rf.lease <= 0 {
		fmt.Fprintln(stderr, "agentsurface demo: --replica-lease must be positive")
		return exitUsage
	}
	if *approve && !*scripted {
		fmt.Fprintln(stderr, "agentsurface demo: --approve needs --scripted")
		return exitUsage
	}
	if *newToken && *scripted {
		fmt.Fprintln(stderr, "agentsurface demo: --new-token does not apply to --scripted, whose session is always new")
		return exitUsage
	}
	if *drain < 0 {
		fmt.Fprintln(stderr, "agentsurface demo: --drain must not be negative")
		return exitUsage
	}
	if rf.postgres != "" && openPostgres == nil {
		return fail(stderr, "demo", errWithoutPostgres)
	}
	levelSet, addrSet, drainSet := false, false, false
	fs.Visit(func(f *flag.Flag) {
		levelSet = levelSet || f.Name == "log-level"
		addrSet = addrSet || f.Name == "addr"
		drainSet = drainSet || f.Name == "drain"
	})
	if rf.postgres != "" && !drainSet {
		*drain = 5 * time.Second // a replica behind a load balancer
	}
	if *scripted && !addrSet {
		*addr = "127.0.0.1:0" // a headless run needs no known port
	}
	if *scripted && !levelSet {
		*logLevel = "warn"
	}
	level, err := parseLogLevel(*logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "agentsurface demo: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(stderr, *logFormat, level)
	if err != nil {
		fmt.Fprintf(stderr, "agentsurface demo: %v\n", err)
		return exitUsage
	}
	pairing := "" // whose printed session the database keeps: this replica's
	if rf.postgres != "" {
		// Every line of a replica names it: several write to one collector.
		name := rf.name
		if name == "" {
			name, _ = os.Hostname()
		}
		log, pairing = log.With("replica", name), name
	}

	// Listen first: the other replicas reach this one at its address.
	ln, err := net.Listen("tcp", *addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		fmt.Fprintf(stderr, "agentsurface demo: %s is already in use; choose another address with --addr\n", *addr)
		return exitFail
	}
	if err != nil {
		return fail(stderr, "demo", fmt.Errorf("listen on %s (see --addr): %w", *addr, err))
	}
	defer ln.Close()

	opts := console.Options{Host: webhost.Options{Logger: log, AllowedHosts: allowedHosts(*addr, *allowHosts), PublicURL: *publicURL}}
	var dep *deployment
	if rf.postgres != "" {
		if dep, err = openDeployment(ctx, rf, ln, log); err != nil {
			return fail(stderr, "demo", err)
		}
		defer dep.close() // after the console has closed (deferred below)
		opts.Store, opts.Host.Replicas = dep.store, dep.rep
	} else {
		dbSet := false
		fs.Visit(func(f *flag.Flag) { dbSet = dbSet || f.Name == "db" })
		if *scripted && !dbSet {
			// The task disables devices: each scripted run starts from the seed.
			dir, err := os.MkdirTemp("", "agentsurface-demo-")
			if err != nil {
				return fail(stderr, "demo", err)
			}
			defer os.RemoveAll(dir)
			*db = filepath.Join(dir, "devices.db")
		}
		store, err := openSQLite(ctx, *db, *reset)
		if err != nil {
			return fail(stderr, "demo", err)
		}
		defer store.Close()
		opts.Store = store
	}
	if *modelURL != "" {
		loop := chat.New(*modelURL, *model, os.Getenv("OPENAI_API_KEY"))
		loop.Header = openAIHeaders()
		loop.RequestTimeout = *modelTimeout
		opts.Agent, opts.AgentName = loop, *model
	}
	app, tel, handler, err := newConsole(ctx, opts)
	if err != nil {
		return fail(stderr, "demo", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.shutdown(sctx); err != nil {
			log.Warn("telemetry shutdown", "error", err)
		}
	}()
	defer app.Close()
	if dep != nil {
		log.Info("replica joined", "id", dep.id(), "name", rf.name, "addr", dep.addr)
	}

	log.Info("serving the devices console", "addr", ln.Addr().String(), "version", modversion.Module())
	srv := newServer(handler, log)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		_ = app.Close() // ends the event streams, so Shutdown need not wait for them
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}()

	base := strings.TrimSuffix(*publicURL, "/")
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	// The printed session is like every other: its views are mounted while
	// a page shows it. Only the headless run keeps them mounted without one,
	// and is always new; the interactive demo's is kept across restarts.
	var s *console.Session
	if *scripted {
		s, err = app.NewSession(console.SessionOptions{KeepShown: true})
	} else {
		s, err = printedSession(ctx, app, opts.Store, pairing, *newToken, log)
	}
	if err != nil {
		return fail(stderr, "demo", err)
	}
	if s.Token() != "" {
		fmt.Fprintf(stdout, "Devices console: %s%s\n", base, s.JoinPath())
		fmt.Fprintf(stdout, "MCP:             claude mcp add --transport http devices %s/mcp --header \"Authorization: Bearer %s\"\n", base, s.Token())
		fmt.Fprintf(stdout, "Inspector:       %s   (needs %s)\n", console.InspectorCommand(base+"/mcp", s.Token()), console.InspectorNode)
	} else {
		// Kept from an earlier start: the database has its credentials'
		// hashes only, so they cannot be printed again.
		fmt.Fprintf(stdout, "Devices console: %s/   (session %s, kept from an earlier start: the link printed then, and its open pages, still work)\n", base, s.ID())
		fmt.Fprintf(stdout, "MCP:             %s/mcp   (the token printed then still works: it is kept as a hash only, so it cannot be printed again; --new-token makes a new one)\n", base)
	}
	fmt.Fprintf(stdout, "Metrics:         %s\n", metricsLine(base))

	if !*scripted {
		fmt.Fprintln(stdout, "Press Ctrl+C to stop.")
		select {
		case <-ctx.Done():
		case err := <-served:
			return fail(stderr, "demo", err)
		}
		// Readiness fails first, so that a load balancer stops sending
		// new requests here; then the deferred calls stop the console and
		// the server.
		app.Host().Drain()
		if *drain > 0 {
			log.Info("draining: /readyz answers 503 until the console stops (a second signal stops it now)", "for", drain.String())
			again := make(chan os.Signal, 1)
			signal.Notify(again, os.Interrupt, syscall.SIGTERM)
			select {
			case <-time.After(*drain):
			case <-again:
			}
			signal.Stop(again)
		}
		return exitOK
	}

	run := console.ScriptedRun{URL: "http://" + ln.Addr().String() + "/mcp", Report: agent.Transcript(stdout)}
	if *approve {
		run.Approver = "host (--approve)"
	} else {
		run.Waiting = func(summary string) {
			fmt.Fprintf(stdout, "     … waiting for your approval in the browser (%s%s): %s\n", base, s.JoinPath(), summary)
		}
	}
	start := time.Now()
	if err := s.PlayScripted(ctx, run); err != nil {
		fmt.Fprintf(stdout, "FAILED after %s\n", time.Since(start).Round(time.Millisecond))
		return fail(stderr, "demo", err)
	}
	fmt.Fprintf(stdout, "OK: every step got the expected outcome (%s)\n", time.Since(start).Round(time.Millisecond))
	return exitOK
}

// newLogger returns the demo's logger on w: --log-format text or json, at
// level.
func newLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	o := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("invalid --log-format %q: want text or json", format)
}

// newServer is the demo's HTTP server: bounded time to send the headers
// and the body of a request, and bounded headers. (Handlers may still run
// long once a request has arrived: event streams, calls waiting for
// approval.)
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// allowedHosts are the Host names the console serves besides loopback
// ones: those of --allow-host, and when addr does not listen on loopback
// alone, the address it listens on (for 0.0.0.0 or ::, every address of
// the machine and its host name). IP addresses are safe to allow: a page
// rebinding its domain name still sends that name.
func allowedHosts(addr, extra string) []string {
	var out []string
	for h := range strings.SplitSeq(extra, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return out
	}
	ip := net.ParseIP(host)
	switch {
	case host != "" && ip == nil: // a name
		out = append(out, host)
	case ip != nil && ip.IsLoopback():
	case ip != nil && !ip.IsUnspecified():
		out = append(out, ip.String())
	default: // every interface
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					out = append(out, n.IP.String())
				}
			}
		}
		if name, err := os.Hostname(); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// openAIHeaders are the organization and project headers of OpenAI's
// API, from the variables its own clients read ($OPENAI_ORG_ID,
// $OPENAI_PROJECT_ID), when they are set.
func openAIHeaders() http.Header {
	h := http.Header{}
	for name, v := range map[string]string{"OpenAI-Organization": "OPENAI_ORG_ID", "OpenAI-Project": "OPENAI_PROJECT_ID"} {
		if val := os.Getenv(v); val != "" {
			h.Set(name, val)
		}
	}
	return h
}

// defaultDB is the database file under the user's cache directory.
func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "agentsurface", "devices.db")
}

// openSQLite opens and seeds the demo's SQLite database at path, deleted
// first with reset.
func openSQLite(ctx context.Context, path string, reset bool) (*domain.Store, error) {
	if reset {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	store, err := domain.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := store.Seed(ctx); err != nil {
		_ = store.Close()
		return nil, err
	}
	return store, nil
}

// printedSession returns the interactive demo's printed session: the one
// the database keeps (its credentials' hashes, under pairing), made again,
// so that the link, the MCP token and the pages of an earlier start keep
// working; or, the first time, with --new-token, or when it cannot be made
// again, a new one, which the database then keeps.
func printedSession(ctx context.Context, app *console.App, store *domain.Store, pairing string, fresh bool, log *slog.Logger) (*console.Session, error) {
	if !fresh {
		p, err := store.Pairing(ctx, pairing)
		switch {
		case err == nil:
			cr := webhost.Credentials{ID: p.SessionID, Cookie: p.Cookie, Token: p.Token, Join: p.Join}
			s, err := app.NewSession(console.SessionOptions{Credentials: &cr})
			if err == nil {
				log.Info("the printed session is the one kept since an earlier start", "session", s.ID(), "since", p.Created)
				return s, nil
			}
			// Another process holds it (two replicas of one name): a new
			// session, not kept, so as not to take the other's place.
			log.Warn("the printed session kept in the database cannot be made again; printing a new one, which a restart will not keep", "session", p.SessionID, "error", err)
			return app.NewSession(console.SessionOptions{})
		case !errors.Is(err, domain.ErrNoPairing):
			log.Warn("cannot read the printed session kept in the database; printing a new one", "error", err)
		}
	}
	s, err := app.NewSession(console.SessionOptions{})
	if err != nil {
		return nil, err
	}
	cr := s.Credentials()
	if err := store.SavePairing(ctx, domain.Pairing{Name: pairing, SessionID: cr.ID, Cookie: cr.Cookie, Token: cr.Token, Join: cr.Join}); err != nil {
		log.Warn("cannot keep the printed session in the database: a restart will print a new one", "error", err)
	}
	return s, nil
}
