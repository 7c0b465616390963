package contract_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentsurface/agentsurface/internal/schema"
	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listed serves reg to consumer with mcpsurface and returns what an SDK
// client lists, over in-memory transports.
func listed(t *testing.T, reg *surface.Registry, consumer surface.Consumer) []*mcp.Tool {
	t.Helper()
	srv, err := mcpsurface.NewServer(reg, consumer, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "contract-test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.Close()
		_ = ss.Wait()
	}()
	var tools []*mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool)
	}
	return tools
}

// asTools converts listed MCP tools through their JSON, as the
// agentsurface contract command does.
func asTools(t *testing.T, tools []*mcp.Tool) []contract.Tool {
	t.Helper()
	out := make([]contract.Tool, len(tools))
	for i, tool := range tools {
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The annotations a registry contract records are exactly those
// mcpsurface serves, tool by tool, and a capability has none exactly when
// mcpsurface leaves its tool out. AS-ADAPTER-001.
func TestAnnotationsAgreeWithMCPSurface(t *testing.T) {
	if contract.MetaCapabilityID != mcpsurface.MetaCapabilityID || contract.MetaKind != mcpsurface.MetaKind || contract.MetaEffect != mcpsurface.MetaEffect {
		t.Fatal("the _meta keys differ from mcpsurface's")
	}
	for _, consumer := range []surface.Consumer{agent, console} {
		reg := shop(t, shopOptions{})
		c, err := contract.FromRegistry(reg, consumer)
		if err != nil {
			t.Fatal(err)
		}
		served := map[string]*mcp.Tool{}
		for _, tool := range listed(t, reg, consumer) {
			served[tool.Name] = tool
		}
		seen := 0
		for _, capab := range c.Consumers[0].Capabilities {
			if capab.Visibility == contract.Hidden {
				continue
			}
			tool, ok := served[capab.WireName]
			if ok != (capab.Annotations != nil) {
				t.Errorf("%s: served %v, annotations %+v", capab.WireName, ok, capab.Annotations)
				continue
			}
			if !ok {
				continue
			}
			seen++
			raw, _ := json.Marshal(tool.Annotations)
			var hints contract.Annotations
			if err := json.Unmarshal(raw, &hints); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(hints)
			want, _ := json.Marshal(capab.Annotations)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: mcpsurface serves %s, the contract says %s", capab.WireName, got, want)
			}
		}
		if seen != len(served) || seen < 8 {
			t.Errorf("%s: compared %d tools of %d served", consumer.Key(), seen, len(served))
		}
	}
}

// An MCP contract records what the tools tell, and agrees with the
// registry contract of the same consumer on every field both know.
func TestFromToolsAgreesWithRegistry(t *testing.T) {
	reg := shop(t, shopOptions{})
	fromReg, err := contract.FromRegistry(reg, agent)
	if err != nil {
		t.Fatal(err)
	}
	fromMCP, err := contract.FromTools("agent", asTools(t, listed(t, reg, agent)))
	if err != nil {
		t.Fatal(err)
	}
	if fromMCP.Source != contract.SourceMCP || fromMCP.Consumers[0].Name != "agent" {
		t.Fatalf("%+v", fromMCP)
	}
	byWire := map[string]contract.Capability{}
	for _, c := range fromMCP.Consumers[0].Capabilities {
		byWire[c.WireName] = c
	}
	served := 0
	for _, r := range fromReg.Consumers[0].Capabilities {
		m, ok := byWire[r.WireName]
		if r.Visibility == contract.Hidden || r.Annotations == nil {
			if ok || r.WireName != "" && r.Visibility == contract.Hidden {
				t.Errorf("%s: listed over MCP although hidden or not served", r.Key())
			}
			continue
		}
		if !ok {
			t.Errorf("%s: not listed", r.Key())
			continue
		}
		served++
		mustEqual := func(field string, got, want any) {
			t.Helper()
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if !bytes.Equal(g, w) {
				t.Errorf("%s %s: over MCP %s, from the registry %s", r.Key(), field, g, w)
			}
		}
		mustEqual("capabilityId", m.CapabilityID, r.CapabilityID)
		mustEqual("kind", m.Kind, r.Kind)
		mustEqual("effect", m.Declared["effect"], r.Declared["effect"])
		mustEqual("description", m.Description, r.Description)
		mustEqual("idempotent", m.Declared["idempotent"], r.Declared["idempotent"])
		mustEqual("requiresConfirmation", m.RequiresConfirmation, r.RequiresConfirmation)
		mustEqual("annotations", m.Annotations, r.Annotations)
		want := r.InputSchema
		if r.Kind == surface.KindObservation {
			want = json.RawMessage(`{"additionalProperties":false,"properties":{},"type":"object"}`)
		}
		// MCP shows schemas portable (internal/schema.Portable: no type
		// arrays), which the prover proves equivalent.
		sameSchema := func(field string, got, want json.RawMessage) {
			t.Helper()
			var g, w any
			_ = json.Unmarshal(got, &g)
			if want != nil {
				_ = json.Unmarshal(schema.Portable(want), &w)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s: over MCP %s, from the registry %s", r.Key(), field, got, want)
			}
			if d := schema.Compare(want, got, nil); want != nil && (d.Wider || d.Narrower) {
				t.Errorf("%s %s: over MCP %s is not equivalent to the registry's %s: %+v", r.Key(), field, got, want, d)
			}
		}
		sameSchema("inputSchema", m.InputSchema, want)
		sameSchema("outputSchema", m.OutputSchema, r.OutputSchema) // taken out of the result envelope mcpsurface declares
		// Unknown over MCP, so absent: of the declared facts, all but the
		// effect and idempotency (reversible, the declared level, and any
		// fact a later surface.Declaration adds).
		for name := range m.Declared {
			if name != "effect" && name != "idempotent" {
				t.Errorf("%s: fact %s is known over MCP: %s", r.Key(), name, m.Declared[name])
			}
		}
		if m.Visibility != contract.Listed || m.Component != nil || m.Context != nil ||
			m.ConfirmationByPolicy != "" || m.BoundFields != nil || m.Meta != nil || m.Policies != nil {
			t.Errorf("%s: a field MCP does not carry is set: %+v", r.Key(), m)
		}
	}
	if served != len(byWire) {
		t.Errorf("%d tools listed, %d matched", len(byWire), served)
	}
}

// Tools of another server keep their description whole and record
// nothing they do not say.
func TestFromToolsForeignServer(t *testing.T) {
	c, err := contract.FromTools("x", []contract.Tool{
		{Name: "search", Description: "[view · read] Search the web", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "delete", Description: "Delete a file", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: &contract.Annotations{IdempotentHint: true}},
		{Name: "odd", Description: "[domain · destructive · maybe] x", InputSchema: json.RawMessage(`{"type":"object"}`),
			Meta: map[string]any{contract.MetaCapabilityID: "domain:odd", contract.MetaEffect: "destructive"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	caps := c.Consumers[0].Capabilities
	if len(caps) != 3 {
		t.Fatalf("%+v", caps)
	}
	byName := map[string]contract.Capability{}
	for _, x := range caps {
		byName[x.WireName] = x
	}
	if s := byName["search"]; s.Description != "[view · read] Search the web" || s.Declared != nil || s.RequiresConfirmation != nil || s.Key() != "tool search" {
		t.Errorf("search: %+v", s)
	}
	if d := byName["delete"]; d.Declared != nil || !d.Annotations.IdempotentHint {
		t.Errorf("delete: %+v", d)
	}
	if o := byName["odd"]; o.Description != "[domain · destructive · maybe] x" || o.RequiresConfirmation != nil || o.Key() != "domain:odd @ tool odd" {
		t.Errorf("odd: %+v", o)
	}
	if _, err := contract.FromTools("", nil); err == nil {
		t.Error("no consumer name: no error")
	}
	if _, err := contract.FromTools("x", []contract.Tool{{Name: "a"}, {Name: "a"}}); err == nil {
		t.Error("two tools of one name: no error")
	}
}
