package pgdomain_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/examples/devices/domain/pgdomain"
)

// A malformed or unreachable URL is an error that does not show the
// password. (Package domain's tests run every Store operation on a
// PostgreSQL Store that Open opened.)
func TestOpenHidesThePassword(t *testing.T) {
	if _, err := pgdomain.Open(context.Background(), "postgres://u:hunter2@127.0.0.1:notaport/db"); !errors.Is(err, domain.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("malformed URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := pgdomain.Open(ctx, "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2")
	if err == nil {
		_ = s.Close()
		t.Fatal("opened a database on port 1")
	}
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "on 127.0.0.1") {
		t.Fatalf("unreachable server: %v", err)
	}
}
