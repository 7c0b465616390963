package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
)

// A session driven through the host API: an agent calling the session's
// registry selects a device and asks to disable it; the user
// approves in the page (here, Decide); the retry executes.
func ExampleSession_Decide() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "console-example")
	defer os.RemoveAll(dir)
	store, err := domain.Open(ctx, filepath.Join(dir, "devices.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	_ = store.Seed(ctx)
	app, err := console.New(console.Options{Store: store})
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()
	s, _ := app.NewSession(console.SessionOptions{KeepShown: true})

	reg, agent := s.Registry(), surface.InvokeOptions{Consumer: surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}}
	reg.Invoke(ctx, surface.Invocation{CapabilityID: "view:devices.table.selectRows", Input: json.RawMessage(`{"ids":["d4"]}`)}, agent)
	disable := surface.Invocation{CapabilityID: domain.DisableID, Input: json.RawMessage(`{"reason":"lobby camera broken"}`)}
	res := reg.Invoke(ctx, disable, agent)
	fmt.Println(res.Error.Code)

	p := s.Pending()[0]
	fmt.Println(p.Summary)
	s.Decide(p.ConfirmationID, true, "olivia (browser)")
	disable.InvocationID, disable.ConfirmationID = res.InvocationID, p.ConfirmationID
	res = reg.Invoke(ctx, disable, agent)
	fmt.Println(res.Status, res.Output)
	// Output:
	// CONFIRMATION_REQUIRED
	// Disable 1 device: camera-lobby-ams-04. Reason: "lobby camera broken"
	// ok {"disabled":1}
}
