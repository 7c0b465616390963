package replica_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Package surface and the adapters other than this one link no Postgres
// driver: replicated deployments are this package's concern alone.
func TestSurfaceLinksNoPostgres(t *testing.T) {
	for _, pkg := range []string{"../surface", "../mcpsurface", "../otelsurface"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/jackc/") || strings.HasSuffix(dep, "/replica") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
