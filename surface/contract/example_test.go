package contract_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
)

type archiveIn struct {
	IDs []string `json:"ids"`
}

// release registers version 1 or 2 of an application's surface: version
// 2 lowers the confirmation of archive and lets it take more ids at
// once.
func release(v int) *surface.Registry {
	reg := surface.New(nil)
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "docs.archive", func(context.Context, *surface.ProcedureCall, archiveIn) (surface.None, error) {
		return surface.None{}, nil
	})
	reg.SetProcedureExecutor(x)
	def := surface.ProcedureDef[archiveIn, surface.None]{
		ID: "domain:docs.archive", Description: "Archive documents", Effect: surface.EffectServerMutation,
		InputSchema:  []byte(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"maxItems":10}},"required":["ids"],"additionalProperties":false}`),
		Confirmation: surface.ConfirmRequired,
	}
	if v == 2 {
		def.Confirmation = surface.ConfirmOptional
		def.InputSchema = []byte(`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string"},"maxItems":100}},"required":["ids"],"additionalProperties":false}`)
		def.Description = "Archive documents (moved to cold storage)"
	}
	if _, err := reg.Register(surface.Component{Type: "docs.list", Description: "The documents", Procedures: []surface.Capability{surface.Procedure(def)}}); err != nil {
		panic(err)
	}
	return reg
}

// Compare classifies what changed between two releases for an MCP
// client: a gate that fails on widening refuses this one.
func ExampleCompare() {
	agent := surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
	v1, v2 := release(1), release(2)
	defer v1.Close()
	defer v2.Close()
	old, err := contract.FromRegistry(v1, agent)
	if err != nil {
		panic(err)
	}
	new, err := contract.FromRegistry(v2, agent)
	if err != nil {
		panic(err)
	}
	changes, err := contract.Compare(old, new)
	if err != nil {
		panic(err)
	}
	_ = contract.WriteTable(os.Stdout, changes)
	fmt.Println("widening:", len(contract.Classes{contract.Widening}.Failing(changes)))
	// Output:
	// CLASS     CONSUMER          CAPABILITY                               FIELD                 CHANGE
	// neutral   mcp-bridge:agent  domain:docs.archive @ docs.list/default  description           "Archive documents" → "Archive documents (moved to cold stora… (descriptions confer no authority)
	// widening  mcp-bridge:agent  domain:docs.archive @ docs.list/default  confirmation          "required" → "optional" (the declared confirmation level)
	// neutral   mcp-bridge:agent  domain:docs.archive @ docs.list/default  requiresConfirmation  true → false (follows from the confirmation level)
	// widening  mcp-bridge:agent  domain:docs.archive @ docs.list/default  inputSchema           may accept more inputs: at ids: a number of items above maxItems 10
	// 4 changes: 2 widening, 0 narrowing, 2 neutral
	// widening: 2
}
