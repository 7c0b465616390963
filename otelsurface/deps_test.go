package otelsurface_test

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Package surface, and every package of this module it imports, import no
// OpenTelemetry: the core stays free of it, and this package adds it.
func TestSurfaceImportsNoOpenTelemetry(t *testing.T) {
	const module = "github.com/agentsurface/agentsurface/"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var visit func(pkg string, from []string)
	visit = func(pkg string, from []string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, module)))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				switch {
				case strings.HasPrefix(path, "go.opentelemetry.io/"):
					t.Errorf("%s imports %s (via %v)", filepath.Join(dir, name), path, from)
				case strings.HasPrefix(path, module):
					visit(path, append(from, pkg))
				}
			}
		}
	}
	visit(module+"surface", nil)
	if len(seen) < 2 {
		t.Fatalf("visited only %v", seen)
	}
}

// The packages that a user of the core or of the MCP adapter builds,
// surface, surface/httpexec and mcpsurface, have no OpenTelemetry module
// in their dependency graph as the go tool computes it: httpexec takes
// trace propagation as an injected http.Client, mcpsurface as a plain
// func option.
func TestAdaptersDependOnNoOpenTelemetry(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	pkgs := []string{"./surface", "./surface/httpexec", "./mcpsurface"}
	cmd := exec.Command(goTool, append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{
		"github.com/agentsurface/agentsurface/surface",
		"github.com/agentsurface/agentsurface/surface/httpexec",
		"github.com/agentsurface/agentsurface/mcpsurface",
		"github.com/modelcontextprotocol/go-sdk/mcp",
	} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps %v lists no %s: %d packages", pkgs, want, len(deps))
		}
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "go.opentelemetry.io/") {
			t.Errorf("%v depend on %s", pkgs, d)
		}
	}
}
