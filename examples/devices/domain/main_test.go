package domain_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/agentsurface/agentsurface/internal/pgtest"
	"go.uber.org/goleak"
)

// pg is the PostgreSQL server of this package's tests.
var pg *pgtest.Cluster

func TestMain(m *testing.M) {
	pg = pgtest.New()
	if ok, reason := pg.Available(); !ok {
		fmt.Fprintln(os.Stderr, "domain tests: no PostgreSQL server, the PostgreSQL cases skip:", reason)
	}
	code := m.Run()
	pg.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
