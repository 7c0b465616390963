package main

// The committed generated and vendored files are what their sources say:
// board_templ.go is what templ v0.3.1118 generates from board.templ, and
// static/htmx.min.js is the npm package's file under its licence header.

//go:generate go run github.com/a-h/templ/cmd/templ@v0.3.1118 generate -f board.templ

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"github.com/a-h/templ/generator"
	"github.com/a-h/templ/parser/v2"
)

// templVersion is the templ the generated code must come from: the one
// go.mod requires (the generator and the runtime are one module).
const templVersion = "v0.3.1118"

// board_templ.go is what `go generate` (templ generate) makes of
// board.templ now: a template edited without regenerating fails here.
func TestTemplGeneratedIsCurrent(t *testing.T) {
	if v := templ.Version(); v != templVersion {
		t.Fatalf("go.mod has templ %s; the generated code and its go:generate line are of %s", v, templVersion)
	}
	tf, err := parser.Parse("board.templ")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := generator.Generate(tf, &b, generator.WithVersion(templ.Version()), generator.WithFileName("board.templ")); err != nil {
		t.Fatal(err)
	}
	want, err := format.Source(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("board_templ.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("board_templ.go is stale: run go generate ./examples/board")
	}
}

// htmxSHA256 is the SHA-256 of dist/htmx.min.js in the npm package
// htmx.org@2.0.11 (npm pack htmx.org@2.0.11).
const htmxSHA256 = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"

// The vendored htmx is the released file, byte for byte, after a header
// that names it and carries its licence (Zero-Clause BSD).
func TestVendoredHTMX(t *testing.T) {
	b, err := static.ReadFile("static/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	header, body, ok := strings.Cut(string(b), " */\n")
	if !ok {
		t.Fatal("no licence header")
	}
	for _, want := range []string{"htmx.org 2.0.11", "Zero-Clause BSD", "Permission to use, copy, modify, and/or distribute this software"} {
		if !strings.Contains(header, want) {
			t.Errorf("the header lacks %q", want)
		}
	}
	if sum := sha256.Sum256([]byte(body)); hex.EncodeToString(sum[:]) != htmxSHA256 {
		t.Errorf("static/htmx.min.js is not htmx.org 2.0.11's dist/htmx.min.js (sha256 %x)", sum)
	}
}

// The board's Go, outside its templates, generated code and tests, stays
// within the 300 lines it takes an application to get per-user sessions,
// an MCP endpoint, approvals in the page, the page-bound lifecycle and
// WebMCP from package webhost.
func TestGoLinesWithinTarget(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, "_templ.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "\n")
	}
	if n == 0 || n > 300 {
		t.Fatalf("%d lines of Go (%v)", n, files)
	}
}

// The CLI does not compile the board, nor templ.
func TestCommandLinksNoBoard(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/agentsurface/agentsurface/cmd/agentsurface").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/a-h/") || strings.HasSuffix(dep, "/examples/board") {
			t.Errorf("cmd/agentsurface depends on %s", dep)
		}
	}
}
