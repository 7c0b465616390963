package webhost_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The host package links neither package replica, nor a Postgres driver,
// nor the OpenTelemetry SDK or Prometheus: an application on one process
// (and the CLI's demo) does not compile them. Replicas come through
// package webreplica.
func TestHostLinksNoReplicaStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/jackc/") || strings.HasSuffix(dep, "/replica") || strings.HasSuffix(dep, "/webreplica") ||
			strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "github.com/prometheus/") {
			t.Errorf("webhost depends on %s", dep)
		}
	}
}
