package teldemo

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests leak no goroutine: the providers, the exporter and the
// console stop when shut down.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
