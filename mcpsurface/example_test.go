package mcpsurface_test

import (
	"context"
	"fmt"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve a registry over MCP and use it with the official SDK client, over
// in-memory transports (use mcp.StdioTransport or NewHTTPHandler for real
// clients).
func Example() {
	ctx := context.Background()
	type Selection struct {
		IDs []string `json:"ids" jsonschema:"Device ids to select"`
	}
	var selected []string

	reg := surface.New(nil)
	defer reg.Close()
	_, err := reg.Register(surface.Component{
		Type: "devices.table", InstanceID: "main", Description: "Devices table",
		Observations: map[string]surface.Capability{
			"readSelection": surface.Observation(surface.ObservationDef[[]string]{
				Description: "The selected device ids",
				Read:        func(context.Context, *surface.Call) ([]string, error) { return selected, nil },
			}),
		},
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[Selection, surface.None]{
				Description: "Replace the selection", Effect: surface.EffectLocalState, Idempotent: true,
				Execute: func(_ context.Context, _ *surface.Call, in Selection) (surface.None, error) {
					selected = in.IDs
					return surface.None{}, nil
				},
			}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	serverSide, clientSide := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, serverSide, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, clientSide, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		cs.Close()
		ss.Wait()
	}()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tools.Tools {
		fmt.Printf("%s readOnly=%v destructive=%v: %s\n", t.Name, t.Annotations.ReadOnlyHint, *t.Annotations.DestructiveHint, t.Description)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "view_devices__table__selectRows",
		Arguments: map[string]any{"ids": []string{"d1", "d2"}},
		Meta:      mcp.Meta{mcpsurface.MetaInvocationID: "call-1"}, // optional: the client's idempotency key
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "view_devices__table__selectRows", Arguments: map[string]any{"ids": "d1"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.IsError, res.StructuredContent.(map[string]any)["error"].(map[string]any)["code"])
	// Output:
	// view_devices__table__readSelection readOnly=true destructive=false: [view · read] The selected device ids
	// view_devices__table__selectRows readOnly=false destructive=false: [view · local-state] Replace the selection
	// false {"status":"ok","invocationId":"call-1","capabilityId":"view:devices.table.selectRows","surfaceVersion":"1"}
	// true INVALID_INPUT
}
