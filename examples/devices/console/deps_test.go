package console_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The console links neither package replica (replicas come through
// package webreplica, which the CLI wires), nor the OpenTelemetry SDK or
// Prometheus (the CLI's telemetry), and imports no Postgres driver
// itself: the lean demo build can leave them out. (Package domain's
// PostgreSQL store still brings pgx.)
func TestConsoleLinksNoReplicaStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasSuffix(dep, "/replica") || strings.HasSuffix(dep, "/webreplica") ||
			strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "github.com/prometheus/") {
			t.Errorf("the console depends on %s", dep)
		}
	}
	out, err = exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, "github.com/jackc/") {
			t.Errorf("the console imports %s", imp)
		}
	}
}
