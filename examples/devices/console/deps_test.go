package console_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The console links neither package replica (replicas come through
// package webreplica, which the CLI wires), nor the OpenTelemetry SDK or
// Prometheus (the CLI's telemetry), nor a Postgres driver (package
// domain's PostgreSQL store opens through package pgdomain): the lean
// demo build can leave them out.
func TestConsoleLinksNoReplicaStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasSuffix(dep, "/replica") || strings.HasSuffix(dep, "/webreplica") || strings.HasSuffix(dep, "/pgdomain") ||
			strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "github.com/prometheus/") ||
			strings.HasPrefix(dep, "github.com/jackc/") {
			t.Errorf("the console depends on %s", dep)
		}
	}
}
