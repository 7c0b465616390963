package console_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/internal/pgtest"
	"go.uber.org/goleak"
)

// pg is the PostgreSQL server of the replica tests, started by the first
// test that needs one (postgres), so that the others do not wait for it.
var (
	pgOnce sync.Once
	pg     *pgtest.Cluster
)

// postgres returns the package's PostgreSQL server.
func postgres() *pgtest.Cluster {
	pgOnce.Do(func() {
		pg = pgtest.New()
		if ok, reason := pg.Available(); !ok {
			fmt.Fprintln(os.Stderr, "console tests: no PostgreSQL server, the replica tests skip:", reason)
		}
	})
	return pg
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pg != nil {
		pg.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
