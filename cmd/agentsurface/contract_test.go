package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
)

// consoleServer serves a devices console over HTTP and returns the MCP
// URL and a session with its views mounted.
func consoleServer(t *testing.T) (string, *console.Session) {
	t.Helper()
	store, err := domain.Open(context.Background(), filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	app, err := console.New(console.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = app.Close() })
	s, err := app.NewSession(console.SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/mcp", s
}

// contract prints what the endpoint lists to the token's consumer, the
// same bytes every time, and agrees with the registry's own contract on
// what both know.
func TestContractCommand(t *testing.T) {
	url, s := consoleServer(t)
	code, out, errOut := cli(t, "contract", url, "--token", s.Token(), "--consumer", "agent")
	if code != exitOK {
		t.Fatalf("%d %s", code, errOut)
	}
	c, err := contract.Parse([]byte(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if c.Source != contract.SourceMCP || len(c.Consumers) != 1 || c.Consumers[0].Name != "agent" {
		t.Fatalf("%+v", c)
	}
	if _, again, _ := cli(t, "contract", "--token", s.Token(), url, "--consumer", "agent"); again != out {
		t.Fatalf("two runs differ:\n%s\n%s", out, again)
	}

	reg, err := contract.FromRegistry(s.Registry(), console.MCPConsumer)
	if err != nil {
		t.Fatal(err)
	}
	byWire := map[string]contract.Capability{}
	for _, r := range reg.Consumers[0].Capabilities {
		if r.Visibility != contract.Hidden && r.Annotations != nil {
			byWire[r.WireName] = r
		}
	}
	if len(c.Consumers[0].Capabilities) != len(byWire) || len(byWire) < 8 {
		t.Fatalf("%d tools over MCP, %d served by the registry's contract", len(c.Consumers[0].Capabilities), len(byWire))
	}
	for _, m := range c.Consumers[0].Capabilities {
		r, ok := byWire[m.WireName]
		if !ok || m.CapabilityID != r.CapabilityID || string(m.Declared["effect"]) != string(r.Declared["effect"]) || m.Description != r.Description ||
			*m.RequiresConfirmation != *r.RequiresConfirmation || string(m.Declared["idempotent"]) != string(r.Declared["idempotent"]) ||
			m.Declared["idempotent"] == nil || m.Visibility != contract.Listed {
			t.Errorf("%s: over MCP %+v, registry %+v", m.WireName, m, r)
		}
	}
	if !strings.Contains(out, `"wireName": "domain_devices__disable"`) || !strings.Contains(out, `"destructiveHint": true`) {
		t.Fatalf("the contract lacks disable:\n%s", out)
	}

	if code, _, errOut := cli(t, "contract", url, "--token", "wrong"); code != exitFail || !strings.Contains(errOut, "agentsurface contract:") {
		t.Fatalf("wrong token: %d %q", code, errOut)
	}
}

// writeContract writes c to a file in dir and returns its path.
func writeContract(t *testing.T, dir, name string, c *contract.Contract) string {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The contract of one consumer of the console, and a copy edited by f.
func consoleContracts(t *testing.T, f func(c *contract.Capability)) (old, new *contract.Contract) {
	t.Helper()
	_, s := consoleServer(t)
	old, err := contract.FromRegistry(s.Registry(), console.MCPConsumer)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := old.Encode()
	if new, err = contract.Parse(b); err != nil {
		t.Fatal(err)
	}
	for i := range new.Consumers[0].Capabilities {
		if c := &new.Consumers[0].Capabilities[i]; c.CapabilityID == domain.DisableID {
			f(c)
		}
	}
	return old, new
}

// diff prints the classified changes and exits 1 when one is of a
// failing class (widening by default).
func TestDiffCommand(t *testing.T) {
	dir := t.TempDir()
	old, lowered := consoleContracts(t, func(c *contract.Capability) { c.Declared.Set("confirmation", surface.ConfirmOptional) })
	oldPath := writeContract(t, dir, "old.json", old)
	newPath := writeContract(t, dir, "new.json", lowered)

	if code, out, _ := cli(t, "diff", oldPath, oldPath); code != exitOK || !strings.Contains(out, "no changes") {
		t.Fatalf("same file: %d %q", code, out)
	}
	code, out, errOut := cli(t, "diff", oldPath, newPath)
	if code != exitFail || !strings.Contains(errOut, "failing class") {
		t.Fatalf("lowered: %d %q", code, errOut)
	}
	for _, want := range []string{"CLASS", "widening", "domain:devices.disable @ devices.table/main", "confirmation", `"required" → "optional"`, "1 widening"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the table lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		fail string
		code int
	}{{"narrowing", exitOK}, {"none", exitOK}, {"any", exitFail}, {"widening,narrowing", exitFail}} {
		if code, _, _ := cli(t, "diff", "--fail", tc.fail, oldPath, newPath); code != tc.code {
			t.Errorf("--fail %s: %d, want %d", tc.fail, code, tc.code)
		}
	}
	// The converse is a narrowing: it passes the default gate.
	if code, out, _ := cli(t, "diff", newPath, oldPath); code != exitOK || !strings.Contains(out, "narrowing") {
		t.Fatalf("raised: %d %s", code, out)
	}

	code, out, _ = cli(t, "diff", oldPath, newPath, "--json")
	var res struct {
		Changes []contract.Change `json:"changes"`
		Fail    []string          `json:"fail"`
		Failing int               `json:"failing"`
		Summary string            `json:"summary"`
	}
	if code != exitFail || json.Unmarshal([]byte(out), &res) != nil || res.Failing != 1 || len(res.Fail) != 1 ||
		res.Summary != "1 change: 1 widening, 0 narrowing, 0 neutral" || res.Changes[0].Field != "confirmation" {
		t.Fatalf("--json: %d %s", code, out)
	}
	if code, out, _ := cli(t, "diff", "--json", "--fail", "none", oldPath, oldPath); code != exitOK || !strings.Contains(out, `"changes": []`) || !strings.Contains(out, `"fail": []`) {
		t.Fatalf("--json, no changes: %d %s", code, out)
	}

	// No base (the first commit of a contract): every consumer is new.
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := cli(t, "diff", empty, newPath); code != exitFail || !strings.Contains(out, "consumer added") {
		t.Fatalf("empty base: %d %s", code, out)
	}

	// Files that are not contracts, or of different sources.
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"format":"x"}`), 0o644)
	mcp, _ := contract.FromTools("agent", nil)
	mcpPath := writeContract(t, dir, "mcp.json", mcp)
	for _, args := range [][]string{{bad, newPath}, {oldPath, filepath.Join(dir, "missing.json")}, {oldPath, mcpPath}} {
		if code, _, errOut := cli(t, append([]string{"diff"}, args...)...); code != exitFail || !strings.HasPrefix(errOut, "agentsurface diff:") {
			t.Errorf("%q: %d %q", args, code, errOut)
		}
	}
}

func TestContractAndDiffUsage(t *testing.T) {
	for _, cmd := range []string{"contract", "diff"} {
		code, out, _ := cli(t, cmd, "--help")
		if code != exitOK || !strings.Contains(out, "Usage: agentsurface "+cmd) {
			t.Errorf("%s --help: %d %q", cmd, code, out)
		}
	}
	if _, out, _ := cli(t, "--help"); !strings.Contains(out, "agentsurface diff OLD NEW") || !strings.Contains(out, "agentsurface contract <mcp-url>") {
		t.Errorf("the usage lacks the commands:\n%s", out)
	}
	for _, args := range [][]string{{"contract"}, {"contract", "a", "b"}, {"contract", "http://x/mcp", "--consumer", ""},
		{"diff"}, {"diff", "a"}, {"diff", "a", "b", "c"}, {"diff", "a", "b", "--fail", "wide"}, {"diff", "--bogus", "a", "b"}} {
		code, out, errOut := cli(t, args...)
		if code != exitUsage || errOut == "" || out != "" && !bytes.Contains([]byte(out), []byte("Usage")) {
			t.Errorf("%q: %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}
