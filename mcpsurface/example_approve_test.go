package mcpsurface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Reach the person through the application's approve page: a client that
// declares URL-mode elicitation is sent to the page and its call waits
// for the decision there; any other client's CONFIRMATION_REQUIRED
// carries the link for the agent to hand to the user (here, a client
// without elicitation).
func ExampleOptions_approveURL() {
	ctx := context.Background()
	reg := surface.New(nil)
	defer reg.Close()
	_, err := reg.Register(surface.Component{
		Type: "devices.table", Description: "Devices table",
		Actions: map[string]surface.Capability{
			"wipe": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Wipe the devices", Effect: surface.EffectLocalState, Confirmation: surface.ConfirmRequired,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) { return surface.None{}, nil },
			}),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := mcpsurface.NewServer(reg, surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}, &mcpsurface.Options{
		// The application's approve page for a pending confirmation: it
		// shows the exact input and asks the signed-in person to decide.
		ApproveURL: func(_ context.Context, p surface.PendingConfirmation) string {
			return "https://app.example/approvals/" + url.PathEscape(p.ConfirmationID)
		},
	})
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
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example-client", Version: "1.0.0"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		cs.Close()
		ss.Wait()
	}()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "view_devices__table__wipe"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var result surface.Result
	_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &result)
	pending := reg.Confirmations().Pending()[0]
	fmt.Println(result.Error.Code, result.Error.ApproveURL() == "https://app.example/approvals/"+pending.ConfirmationID)
	fmt.Println(strings.ReplaceAll(result.Error.Message, pending.ConfirmationID, "cnf_…"))
	// Output:
	// CONFIRMATION_REQUIRED true
	// Ask the user to approve this call at https://app.example/approvals/cnf_… and retry with the confirmationId once approved.
}
