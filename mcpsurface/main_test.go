package mcpsurface_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(panicServerEnv) == "1" { // the subprocess of TestPanicInAgentDrivenUserCodeKeepsProcessServing
		os.Exit(servePanicServer())
	}
	goleak.VerifyTestMain(m)
}
