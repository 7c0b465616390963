// Command server serves the fixtures of the official MCP conformance
// suite through mcpsurface, for running the suite against it:
//
//	go run ./mcpsurface/internal/conformance/server -addr 127.0.0.1:3000 [-stateless]
//	npx @modelcontextprotocol/conformance server --url http://127.0.0.1:3000/mcp
//
// It prints its URL once it listens, and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentsurface/agentsurface/mcpsurface/internal/conformance"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3000", "listen on this address")
	stateless := flag.Bool("stateless", false, "serve every request session-less, also those of clients older than 2026-07-28")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(*addr, *stateless, log); err != nil {
		log.Error("conformance server", "error", err)
		os.Exit(1)
	}
}

func run(addr string, stateless bool, log *slog.Logger) error {
	s, err := conformance.New(&conformance.Options{Stateless: stateless, Logger: log})
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s)
	srv := &http.Server{Handler: mux}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = s.Close() // ends the open streams, so that Shutdown can finish
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
