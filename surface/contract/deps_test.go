package contract_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The contract package depends on the core and the module's internal
// packages only: no MCP SDK (it restates mcpsurface's annotation rule
// and _meta keys, and mcp_test.go checks they agree), no adapter.
func TestDependsOnNoAdapter(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/agentsurface/agentsurface/surface") {
		t.Fatalf("go list -deps lists no surface: %d packages", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/modelcontextprotocol/") || strings.HasSuffix(d, "/mcpsurface") ||
			strings.Contains(d, "/examples/") || strings.HasPrefix(d, "go.opentelemetry.io/") {
			t.Errorf("surface/contract depends on %s", d)
		}
	}
}
