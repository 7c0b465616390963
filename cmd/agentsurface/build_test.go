package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/agentsurface/agentsurface/"

// goListDeps returns the packages this command links when built with the
// build tags.
func goListDeps(t *testing.T, tags ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	args := []string{"list", "-deps"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command(goTool, append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"modernc.org/sqlite", "github.com/modelcontextprotocol/go-sdk/mcp", module + "examples/devices/console"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go %v lists no %s among %d packages", args, want, len(deps))
		}
	}
	return deps
}

// The default build is lean, so that a first `go run ./cmd/agentsurface
// demo` compiles quickly (issue 37 item 2): it links no PostgreSQL
// driver, replica package, OpenTelemetry, Prometheus client or protobuf;
// the build tags postgres and otel add them (features.go).
func TestDemoDefaultBuildIsLean(t *testing.T) {
	for _, d := range goListDeps(t) {
		for _, banned := range []string{
			"github.com/jackc/", "go.opentelemetry.io/", "github.com/prometheus/", "google.golang.org/protobuf",
			"golang.org/x/text/", // pgx's SCRAM authentication
			module + "replica", module + "webhost/webreplica", module + "otelsurface",
			module + "examples/devices/domain/pgdomain", module + "cmd/agentsurface/internal/",
		} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the default build links %s", d)
			}
		}
	}
}

// The build with every tag links what its features need, so that none
// is dropped silently.
func TestDemoFullBuildHasItsFeatures(t *testing.T) {
	deps := goListDeps(t, fullBuild...)
	for _, want := range []string{
		module + "cmd/agentsurface/internal/pgdemo", module + "examples/devices/domain/pgdomain",
		module + "webhost/webreplica", module + "replica", "github.com/jackc/pgx/v5/pgxpool",
		module + "cmd/agentsurface/internal/teldemo", module + "otelsurface",
		"go.opentelemetry.io/otel/sdk/trace", "go.opentelemetry.io/otel/sdk/metric",
		"github.com/prometheus/client_golang/prometheus/promhttp", "google.golang.org/protobuf/proto",
	} {
		if !slices.Contains(deps, want) {
			t.Errorf("the build with -tags %v does not link %s", fullBuild, want)
		}
	}
	// Each tag alone brings its own feature and not the other's.
	pg, tel := goListDeps(t, "postgres"), goListDeps(t, "otel")
	if !slices.Contains(pg, "github.com/jackc/pgx/v5") || slices.Contains(pg, "go.opentelemetry.io/otel/sdk/trace") {
		t.Error("-tags postgres: pgx missing or the OpenTelemetry SDK linked")
	}
	if !slices.Contains(tel, "go.opentelemetry.io/otel/sdk/trace") || slices.Contains(tel, "github.com/jackc/pgx/v5") {
		t.Error("-tags otel: the OpenTelemetry SDK missing or pgx linked")
	}
}

// The demo links no gRPC even with every feature: teldemo's OTLP client
// replaces otlptracehttp, whose configuration code pulls in
// google.golang.org/grpc and grpc-gateway, and no other package it
// imports needs them.
func TestDemoLinksNoGRPC(t *testing.T) {
	deps := goListDeps(t, fullBuild...)
	if len(deps) < 100 {
		t.Fatalf("go list -deps lists %d packages", len(deps))
	}
	for _, d := range deps {
		for _, banned := range []string{"google.golang.org/grpc", "github.com/grpc-ecosystem/", "google.golang.org/genproto/", "github.com/openai/"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the demo links %s", d)
			}
		}
	}
}

// A binary built without the tags (this test binary is one, unless go
// test was given them) says so, and how to build one with them:
// --postgres fails, an OTLP endpoint variable is warned about (the
// console runs without traces), the printed Metrics line and --help say
// what is missing.
func TestDemoWithoutFeaturesSaysHowToGetThem(t *testing.T) {
	// The usage errors of the flags come first, as in every build.
	if code, _, _ := cli(t, "demo", "--postgres", "postgres://x/y", "--reset"); code != exitUsage {
		t.Errorf("--postgres with --reset: %d", code)
	}
	if openPostgres == nil {
		code, _, errOut := cli(t, "demo", "--addr", "127.0.0.1:0", "--postgres", "postgres://u@127.0.0.1:1/db")
		if code != exitFail || !strings.Contains(errOut, "built without PostgreSQL") || !strings.Contains(errOut, "go build -tags 'postgres otel' ./cmd/agentsurface") {
			t.Errorf("--postgres: %d %q", code, errOut)
		}
	}
	if withTelemetry == nil {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		code, out, errOut := cli(t, "demo", "--scripted", "--approve", "--addr", "127.0.0.1:0")
		if code != exitOK || !strings.Contains(out, "Metrics:         none in this build (the otel build tag adds") {
			t.Fatalf("--scripted: %d\n%s\n%s", code, out, errOut)
		}
		if !strings.Contains(errOut, "OTEL_EXPORTER_OTLP_ENDPOINT is set, but this binary was built without OpenTelemetry") || !strings.Contains(errOut, "go run -tags postgres,otel ./cmd/agentsurface demo") {
			t.Errorf("no warning about the OTLP variable:\n%s", errOut)
		}
	}

	_, help, _ := cli(t, "demo", "--help")
	in := func(b bool) string {
		if b {
			return " (in this binary)"
		}
		return " (not in this binary)"
	}
	for _, want := range []string{"postgres" + in(openPostgres != nil), "otel" + in(withTelemetry != nil), "go run -tags postgres,otel ./cmd/agentsurface demo",
		"go build -tags 'postgres otel' ./cmd/agentsurface", "go install -tags 'postgres otel' github.com/agentsurface/agentsurface/cmd/agentsurface@latest"} {
		if !strings.Contains(help, want) {
			t.Errorf("demo --help lacks %q:\n%s", want, help)
		}
	}
}

// traceSink is an OTLP/HTTP endpoint that keeps the bodies posted to
// /v1/traces.
type traceSink struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *traceSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP traces export", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
}

func (s *traceSink) all() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.bodies, nil)
}

// A binary built with the otel tag serves /metrics and exports the
// scripted task's invocation spans over OTLP/HTTP to the collector
// OTEL_EXPORTER_OTLP_ENDPOINT names (package teldemo's tests check the
// contents in depth); its --help says it has both features.
func TestDemoFullBuildTelemetry(t *testing.T) {
	bin := buildCLI(t, fullBuild...)
	sink := &traceSink{}
	col := httptest.NewServer(sink)
	defer col.Close()

	code, out, errOut := runCLI(t, bin, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.URL}, "demo", "--scripted", "--approve", "--addr", "127.0.0.1:0")
	if code != exitOK || !strings.Contains(out, "Metrics:         http://127.0.0.1:") {
		t.Fatalf("--scripted: %d\n%s\n%s", code, out, errOut)
	}
	// The exporter flushes before the demo exits.
	got := sink.all()
	for _, want := range []string{"agentsurface-demo", "invoke domain:devices.disable", "invoke view:devices.table.setFilter"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("the collector got no %q in %d bytes", want, len(got))
		}
	}

	p := startDemoProc(t, bin, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "d.db"), "--drain", "0s")
	res, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("agentsurface_console_sessions")) || !bytes.Contains(body, []byte("go_goroutines")) {
		t.Fatalf("/metrics: %s\n%.500s", res.Status, body)
	}

	_, help, _ := runCLI(t, bin, nil, "demo", "--help")
	if !strings.Contains(help, "postgres (in this binary)") || !strings.Contains(help, "otel (in this binary)") {
		t.Errorf("demo --help of the full build:\n%s", help)
	}
}
