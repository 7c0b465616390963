package surfacetest_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// update is the -update flag that RequireGolden reads.
var update = flag.Bool("update", false, "rewrite golden files")

// devicesRegistry returns a registry with the devices page and table
// mounted, the table's route set, and its devices.
func devicesRegistry(t *testing.T) (*surface.Registry, *devices) {
	t.Helper()
	d := &devices{}
	reg := surfacetest.NewRegistry(t, &surface.Options{Route: func() *surface.Route {
		return &surface.Route{Path: "/devices", Params: map[string]string{"tab": "all"}}
	}})
	reg.SetProcedureExecutor(d.executor())
	surfacetest.MustRegister(t, reg, d.table("main"))
	surfacetest.MustRegister(t, reg, d.page())
	return reg, d
}

// AS-TEST-001: the semantic snapshot is the golden testdata/semantic.json:
// no surface id or capture time, no version by default, registration ids
// as <reg#N> by first appearance (components, then procedures), the
// registry's order, schemas verbatim.
func TestSemanticSnapshot_AS_TEST_001(t *testing.T) {
	reg, _ := devicesRegistry(t)
	snap := reg.Snapshot(surface.SnapshotOptions{})
	got := surfacetest.SemanticSnapshot(snap, nil)
	surfacetest.RequireGolden(t, "semantic.json", got)

	var sem map[string]json.RawMessage
	if err := json.Unmarshal(got, &sem); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(sem))
	for k := range sem {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "components,procedures,route" {
		t.Fatalf("keys %v", keys)
	}
	for _, volatile := range []string{reg.SurfaceID(), snap.CapturedAt.UTC().Format("2006-01-02T15"), "reg_", "srf_"} {
		if strings.Contains(string(got), volatile) {
			t.Fatalf("the semantic form keeps %q:\n%s", volatile, got)
		}
	}
	// Registry order (by type): the page, then the table; the procedure
	// reference, numbered after the components, names the table's
	// placeholder.
	var parsed struct {
		Components []surface.ComponentDescriptor
		Procedures []surface.ProcedureDescriptor
	}
	if err := json.Unmarshal(got, &parsed); err != nil {
		t.Fatal(err)
	}
	if len(parsed.Components) != 2 || parsed.Components[0].Type != "devices.page" || parsed.Components[0].RegistrationID != "<reg#1>" ||
		parsed.Components[1].Type != "devices.table" || parsed.Components[1].RegistrationID != "<reg#2>" {
		t.Fatalf("components %+v", parsed.Components)
	}
	if len(parsed.Procedures) != 1 || parsed.Procedures[0].RegistrationID != "<reg#2>" {
		t.Fatalf("procedures %+v", parsed.Procedures)
	}
	// Schemas verbatim: the same JSON value, key order included.
	if a, b := compact(t, parsed.Components[1].Observations[0].OutputSchema), compact(t, snap.Components[1].Observations[0].OutputSchema); a != b {
		t.Fatalf("schema changed:\n%s\n%s", a, b)
	}
	if a, b := compact(t, parsed.Procedures[0].InputSchema), compact(t, snap.Procedures[0].InputSchema); a != b {
		t.Fatalf("schema changed:\n%s\n%s", a, b)
	}
	// Normalizing changed nothing in the caller's snapshot.
	if snap.Components[0].RegistrationID == "<reg#1>" || snap.Procedures[0].RegistrationID == "<reg#2>" {
		t.Fatal("SemanticSnapshot wrote into its argument")
	}
}

// AS-TEST-001: the semantic form is deterministic: two registries built
// alike (different surface ids, registration ids, capture times, mount
// order of unrelated types) give the same bytes.
func TestSemanticSnapshotDeterministic_AS_TEST_001(t *testing.T) {
	a, _ := devicesRegistry(t)
	d := &devices{}
	b := surfacetest.NewRegistry(t, &surface.Options{Route: func() *surface.Route {
		return &surface.Route{Path: "/devices", Params: map[string]string{"tab": "all"}}
	}})
	b.SetProcedureExecutor(d.executor())
	surfacetest.MustRegister(t, b, surface.Component{Type: "other", Description: "Mounted then gone"}).Unregister()
	surfacetest.MustRegister(t, b, d.page()) // the other order
	surfacetest.MustRegister(t, b, d.table("main"))
	sa, sb := a.Snapshot(surface.SnapshotOptions{}), b.Snapshot(surface.SnapshotOptions{})
	if sa.SurfaceID == sb.SurfaceID || sa.SurfaceVersion == sb.SurfaceVersion {
		t.Fatal("the fixture should differ in its volatile fields")
	}
	ga, gb := surfacetest.SemanticSnapshot(sa, nil), surfacetest.SemanticSnapshot(sb, nil)
	if string(ga) != string(gb) {
		t.Fatalf("not deterministic:\n%s\n%s", ga, gb)
	}
	if again := surfacetest.SemanticSnapshot(sa, nil); string(again) != string(ga) {
		t.Fatal("not deterministic for one snapshot")
	}
}

// AS-TEST-001: surfaceVersion is opt-in and then the first key; truncated
// appears when a budget dropped components; route only when there is one;
// an empty surface still has both lists.
func TestSemanticSnapshotOptionalKeys_AS_TEST_001(t *testing.T) {
	reg, _ := devicesRegistry(t)
	snap := reg.Snapshot(surface.SnapshotOptions{Budget: &surface.Budget{MaxComponents: 1}})
	got := string(surfacetest.SemanticSnapshot(snap, &surfacetest.SemanticOptions{IncludeVersion: true}))
	if !strings.HasPrefix(got, "{\n  \"surfaceVersion\": \""+snap.SurfaceVersion+"\",\n  \"route\"") {
		t.Fatalf("version not first:\n%s", got)
	}
	if !strings.HasSuffix(got, "\"truncated\": {\n    \"droppedComponents\": 1\n  }\n}\n") {
		t.Fatalf("truncated not last:\n%s", got)
	}
	if strings.Contains(string(surfacetest.SemanticSnapshot(snap, nil)), "surfaceVersion") {
		t.Fatal("surfaceVersion kept by default")
	}
	empty := surfacetest.NewRegistry(t, nil)
	want := "{\n  \"components\": [],\n  \"procedures\": []\n}\n"
	if got := string(surfacetest.SemanticSnapshot(empty.Snapshot(surface.SnapshotOptions{}), nil)); got != want {
		t.Fatalf("empty surface:\n%s", got)
	}
	if got := string(surfacetest.SemanticSnapshot(surface.Snapshot{}, nil)); got != want {
		t.Fatalf("zero snapshot:\n%s", got)
	}
}

// AS-TEST-001: the wire form normalizes to the same semantic form, and
// surface_discover's scopeRejected is dropped.
func TestSemanticSnapshotJSON_AS_TEST_001(t *testing.T) {
	reg, _ := devicesRegistry(t)
	snap := reg.Snapshot(surface.SnapshotOptions{})
	wire, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	got, err := surfacetest.SemanticSnapshotJSON(wire, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := surfacetest.SemanticSnapshot(snap, nil); string(got) != string(want) {
		t.Fatalf("wire form:\n%s\nwant\n%s", got, want)
	}

	ts, err := surface.NewToolset(reg, surface.ToolsetOptions{Mode: surface.ToolsetMeta, Topology: surface.TopologyRemote,
		Consumer: surfacetest.Consumer(), Scope: []string{"devices"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	ts.Tools()
	res := ts.Call(context.Background(), surface.MetaDiscover, json.RawMessage(`{"scope":["devices","settings"]}`), surface.CallOptions{})
	surfacetest.RequireOK(t, res)
	if !strings.Contains(string(res.Output), `"scopeRejected"`) {
		t.Fatalf("the fixture should reject a scope: %s", res.Output)
	}
	got, err = surfacetest.SemanticSnapshotJSON([]byte(res.Output), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "scopeRejected") {
		t.Fatalf("scopeRejected kept:\n%s", got)
	}
	surfacetest.RequireGolden(t, "semantic.json", got)

	for _, bad := range []string{``, `[]`, `{"surfaceId":"srf_1"}`, `{"components":{}}`} {
		if _, err := surfacetest.SemanticSnapshotJSON([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// AS-TEST-001: RequireGolden fails on a difference and on a missing file
// (saying how to fix it), and -update rewrites the golden.
func TestRequireGolden_AS_TEST_001(t *testing.T) {
	t.Chdir(t.TempDir())
	setUpdate(t, false)
	fatal(t, func(tb *fakeTB) { surfacetest.RequireGolden(tb, "new.json", []byte("{}\n")) }, "testdata/new.json", "-update")

	setUpdate(t, true)
	passes(t, func(tb *fakeTB) { surfacetest.RequireGolden(tb, "sub/new.json", []byte("{}\n")) })
	setUpdate(t, false)
	if b, err := os.ReadFile(filepath.Join("testdata", "sub", "new.json")); err != nil || string(b) != "{}\n" {
		t.Fatalf("-update wrote %q, %v", b, err)
	}
	passes(t, func(tb *fakeTB) { surfacetest.RequireGolden(tb, "sub/new.json", []byte("{}\n")) })
	msg := fatal(t, func(tb *fakeTB) { surfacetest.RequireGolden(tb, "sub/new.json", []byte("{\n}\n")) }, "differs", "-update")
	if !strings.Contains(msg, "line 1") {
		t.Fatalf("no first difference in %q", msg)
	}
}

// AS-TEST-001: RequireSnapshotGolden takes a registry (or a harness).
func TestRequireSnapshotGolden_AS_TEST_001(t *testing.T) {
	reg, d := devicesRegistry(t)
	surfacetest.RequireSnapshotGolden(t, reg, "semantic.json")
	// A changed surface no longer matches.
	setUpdate(t, false)
	surfacetest.MustRegister(t, reg, d.table("side"))
	fatal(t, func(tb *fakeTB) { surfacetest.RequireSnapshotGolden(tb, reg, "semantic.json") }, "semantic.json differs")
}

// setUpdate sets the -update flag until the test ends.
func setUpdate(t *testing.T, on bool) {
	t.Helper()
	was := *update
	*update = on
	t.Cleanup(func() { *update = was })
}

func compact(t *testing.T, text surface.JSONText) string {
	t.Helper()
	b, err := json.Marshal(text)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
