package otelsurface_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
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
