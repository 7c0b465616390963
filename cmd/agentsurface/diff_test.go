package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
)

// oneCapability is a contract whose one capability takes input.
func oneCapability(input string) *contract.Contract {
	parent := &surface.Parent{Type: "shop.cart", InstanceID: "main"}
	return &contract.Contract{Format: contract.Format, Version: contract.Version, Source: contract.SourceRegistry,
		Consumers: []contract.ConsumerView{{Name: "mcp-bridge:agent", Kind: surface.ConsumerMCPBridge, ID: "agent",
			Capabilities: []contract.Capability{{CapabilityID: "view:shop.cart.addItem", Kind: surface.KindAction, Component: parent,
				Visibility: contract.Exposed, Declared: effect(surface.EffectLocalState), InputSchema: json.RawMessage(input)}}}}}
}

// effect is the declared facts of a capability that declares only its
// effect.
func effect(e surface.Effect) contract.Facts {
	var f contract.Facts
	f.Set("effect", e)
	return f
}

// diff --fail widening fails a change the checker cannot prove safe: a
// patternProperties added next to additionalProperties false, which lets
// agents send members the old schema refused (issue 38 item 3).
func TestDiffFailsUnprovenSchemas(t *testing.T) {
	dir := t.TempDir()
	oldPath := writeContract(t, dir, "old.json", oneCapability(`{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`))
	newPath := writeContract(t, dir, "new.json", oneCapability(`{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false,"patternProperties":{"^x":{}}}`))
	code, out, errOut := cli(t, "diff", oldPath, newPath)
	if code != exitFail || !strings.Contains(out, "widening (mixed)") || !strings.Contains(out, "unproven") || !strings.Contains(errOut, "failing class") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// Files and schemas beyond the size limits are refused with a message
// that says which limit, and the exit status 1.
func TestDiffRefusesTooLarge(t *testing.T) {
	dir := t.TempDir()
	small := writeContract(t, dir, "small.json", oneCapability(`{"type":"object"}`))

	huge := filepath.Join(dir, "huge.json")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(contract.MaxFileBytes + 1); err != nil { // sparse: nothing is written
		t.Fatal(err)
	}
	f.Close()
	if code, _, errOut := cli(t, "diff", small, huge); code != exitFail || !strings.Contains(errOut, "huge.json: contract: the file is") || !strings.Contains(errOut, "more than the limit") {
		t.Fatalf("exit %d: %s", code, errOut)
	}

	big := writeContract(t, dir, "big.json", oneCapability(`{"type":"object","description":"`+strings.Repeat("x", contract.MaxSchemaBytes)+`"}`))
	if code, _, errOut := cli(t, "diff", small, big); code != exitFail || !strings.Contains(errOut, "agentsurface diff: new contract: contract: the inputSchema of view:shop.cart.addItem") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
