package replica_test

import (
	"testing"

	"github.com/agentsurface/agentsurface/internal/pgtest"
)

// pg is the PostgreSQL server of this package's tests, started by the
// first test that needs one.
var pg pgtest.Lazy

func TestMain(m *testing.M) { pgtest.Main(m, &pg) }
