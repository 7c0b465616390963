package domain_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Package domain links no PostgreSQL driver, so that a program keeping
// its devices in SQLite compiles none; package pgdomain brings pgx.
func TestDomainLinksNoPostgresDriver(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "modernc.org/sqlite") {
		t.Fatalf("go list -deps lists no SQLite driver among %d packages", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/jackc/") || strings.HasPrefix(d, "github.com/lib/pq") {
			t.Errorf("package domain depends on %s", d)
		}
	}
}
