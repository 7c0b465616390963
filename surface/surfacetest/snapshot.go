package surfacetest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// Snapshotter is what has a snapshot: a *Surface (its consumer's
// snapshot unless the options name another consumer) or a
// *surface.Registry (the anonymous embedded consumer's). The matchers and
// RequireSnapshotGolden take one.
type Snapshotter interface {
	Snapshot(surface.SnapshotOptions) surface.Snapshot
}

// SemanticOptions select what a semantic snapshot keeps. The zero value
// (or a nil *SemanticOptions) keeps the defaults.
type SemanticOptions struct {
	// IncludeVersion keeps the surface version, as the first key. By
	// default it is dropped: it counts every mutation since the registry
	// was made, so it changes whenever a test does one more step.
	IncludeVersion bool
}

// semantic is the normalized form, its fields in the order they are
// written.
type semantic struct {
	SurfaceVersion string                        `json:"surfaceVersion,omitempty"`
	Route          *surface.Route                `json:"route,omitempty"`
	Components     []surface.ComponentDescriptor `json:"components"`
	Procedures     []surface.ProcedureDescriptor `json:"procedures"`
	Truncated      *surface.Truncated            `json:"truncated,omitempty"`
}

// SemanticSnapshot returns the semantic form of snap: indented JSON,
// deterministic for a given surface, meant for golden files (see
// RequireGolden). It has the keys surfaceVersion (only with
// IncludeVersion), route (when the snapshot has one), components,
// procedures and truncated (when a budget dropped components). It drops
// what differs between two runs of the same test: the surface id and the
// capture time; each registration id becomes "<reg#N>", numbered by first
// appearance, components first, then procedures, so that a procedure
// reference shows which component holds it. Components and capabilities
// keep the registry's order, and schemas and meta records are kept as they
// are: a change of a schema is what such a golden is there to catch.
func SemanticSnapshot(snap surface.Snapshot, opts *SemanticOptions) []byte {
	var o SemanticOptions
	if opts != nil {
		o = *opts
	}
	sem := semantic{Route: snap.Route, Truncated: snap.Truncated,
		Components: slices.Clone(snap.Components), Procedures: slices.Clone(snap.Procedures)}
	if o.IncludeVersion {
		sem.SurfaceVersion = snap.SurfaceVersion
	}
	if sem.Components == nil {
		sem.Components = []surface.ComponentDescriptor{}
	}
	if sem.Procedures == nil {
		sem.Procedures = []surface.ProcedureDescriptor{}
	}
	placeholders := map[string]string{}
	placeholder := func(id string) string {
		p, ok := placeholders[id]
		if !ok {
			p = "<reg#" + strconv.Itoa(len(placeholders)+1) + ">"
			placeholders[id] = p
		}
		return p
	}
	for i := range sem.Components {
		c := &sem.Components[i]
		c.RegistrationID = placeholder(c.RegistrationID)
		if c.Observations == nil {
			c.Observations = []surface.ObservationDescriptor{}
		}
		if c.Actions == nil {
			c.Actions = []surface.ActionDescriptor{}
		}
	}
	for i := range sem.Procedures {
		p := &sem.Procedures[i]
		p.RegistrationID = placeholder(p.RegistrationID)
		if p.BoundFields == nil {
			p.BoundFields = []surface.BoundField{}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<reg#1>", not "\u003creg#1\u003e"
	enc.SetIndent("", "  ")
	if err := enc.Encode(sem); err != nil {
		// Descriptors always encode: their schemas and meta records were
		// checked JSON when they were registered.
		panic("surfacetest: encoding a snapshot: " + err.Error())
	}
	return buf.Bytes()
}

// SemanticSnapshotJSON is SemanticSnapshot for a snapshot in its wire
// form, as an adapter hands it to an agent: the output of surface_discover
// or a snapshot read over the wire. Besides the surface id and capture
// time it drops what is not part of the snapshot itself, such as
// surface_discover's scopeRejected. It fails if wire is not a snapshot.
func SemanticSnapshotJSON(wire []byte, opts *SemanticOptions) ([]byte, error) {
	var snap struct {
		SurfaceVersion string                        `json:"surfaceVersion"`
		Route          *surface.Route                `json:"route"`
		Components     []surface.ComponentDescriptor `json:"components"`
		Procedures     []surface.ProcedureDescriptor `json:"procedures"`
		Truncated      *surface.Truncated            `json:"truncated"`
	}
	if err := json.Unmarshal(wire, &snap); err != nil {
		return nil, fmt.Errorf("surfacetest: not a snapshot: %w", err)
	}
	if snap.Components == nil {
		return nil, fmt.Errorf("surfacetest: not a snapshot: no components")
	}
	return SemanticSnapshot(surface.Snapshot{SurfaceVersion: snap.SurfaceVersion, Route: snap.Route,
		Components: snap.Components, Procedures: snap.Procedures, Truncated: snap.Truncated}, opts), nil
}

// RequireSnapshotGolden compares the semantic form of src's snapshot (see
// SemanticSnapshot; the surface version dropped) with the golden file
// testdata/name, as RequireGolden does. For a *Surface the snapshot is its
// consumer's; for a *surface.Registry, the anonymous embedded consumer's.
func RequireSnapshotGolden(tb testing.TB, src Snapshotter, name string) {
	tb.Helper()
	RequireGolden(tb, name, SemanticSnapshot(src.Snapshot(surface.SnapshotOptions{}), nil))
}

// RequireGolden fails the test unless got equals the contents of the
// golden file testdata/name, byte for byte.
//
// When the test binary runs with -update, RequireGolden writes got to the
// file instead (creating testdata if needed), so that a reviewed change of
// output is accepted by running the tests once with -update. The flag is
// the test binary's: RequireGolden reads a boolean flag named "update" if
// the test package defines one, as most packages with golden files do:
//
//	var update = flag.Bool("update", false, "rewrite golden files")
//
// (surfacetest cannot define it itself: two definitions of one flag in a
// test binary panic.) Without it, goldens are only compared.
func RequireGolden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatalf("golden %s: %v", path, err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatalf("golden %s: %v", path, err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("golden %s: %v (run the test with -update to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		tb.Fatalf("golden %s differs (run the test with -update to accept the new output)%s\ngot:\n%s",
			path, firstDifference(got, want), got)
	}
}

// updating reports whether the test binary defines a boolean flag named
// "update" and it is set.
func updating() bool {
	f := flag.Lookup("update")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	set, ok := g.Get().(bool)
	return ok && set
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if i >= len(g) || i >= len(w) || gl != wl {
			return fmt.Sprintf("\nfirst difference at line %d:\n got: %q\nwant: %q", i+1, gl, wl)
		}
	}
	return ""
}
