package surface_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// detailsOwner is the one file whose code may read an error's details
// map: the accessors of *surface.Error live there.
const detailsOwner = "surface/errors.go"

// No non-test code reads *surface.Error's details by key (or ranges over
// them, or passes the map on): it calls the accessors, which return the
// same value whether the error was made in process or decoded from JSON.
// The check parses every Go file of the module.
func TestNoDetailsReadOutsideErrorsGo(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" ||
				name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == detailsOwner {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		reads, err := detailsReads(rel, src)
		if err != nil {
			return err
		}
		files++
		for _, r := range reads {
			t.Errorf("%s reads an error's Details; use the accessors of *surface.Error (Issues, Reason, RetryAfter, …)", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 { // the walk found the module, not an empty directory
		t.Fatalf("checked only %d files under %s", files, root)
	}
}

// The checker itself finds every kind of read, and only reads.
func TestDetailsReadsChecker(t *testing.T) {
	src := `package p

func f(e *surface.Error, res surface.Result) {
	_ = e.Details["summary"]                  // 4: index
	s, _ := res.Error.Details["reason"].(string) // 5: index, deeper
	for k := range e.Details {                // 6: range
		_ = k
	}
	g(e.Details)                              // 9: passed on
	m := e.Details                            // 10: copied
	_ = len(e.Details)                        // 11: measured
	e.Details = nil                           // a write: allowed
	e.Details["x"] = 1                        // a write: allowed
	_ = surface.Error{Details: nil}           // a field name: allowed
	_ = other.DetailsOf                       // another name: allowed
	_, _ = s, m
}
`
	reads, err := detailsReads("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"p.go:4", "p.go:5", "p.go:6", "p.go:9", "p.go:10", "p.go:11"}
	if !slices.Equal(reads, want) {
		t.Fatalf("reads at %v, want %v", reads, want)
	}
}

// detailsReads returns the positions (file:line) in src where a field
// named Details is read: every selector x.Details except the target of a
// plain assignment (x.Details = v, x.Details[k] = v).
func detailsReads(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	written := map[*ast.SelectorExpr]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || as.Tok != token.ASSIGN {
			return true
		}
		for _, lhs := range as.Lhs {
			if ix, ok := lhs.(*ast.IndexExpr); ok {
				lhs = ix.X
			}
			if sel, ok := lhs.(*ast.SelectorExpr); ok {
				written[sel] = true
			}
		}
		return true
	})
	var reads []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Details" && !written[sel] {
			p := fset.Position(sel.Sel.Pos())
			reads = append(reads, p.Filename+":"+strconv.Itoa(p.Line))
		}
		return true
	})
	return reads, nil
}

// moduleRoot returns the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
