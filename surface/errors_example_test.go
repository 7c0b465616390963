package surface_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentsurface/agentsurface/surface"
)

// A client reads the issues of an INVALID_INPUT the same way whether the
// result came from the registry in process or was decoded from JSON.
func ExampleError_Issues() {
	reg := surface.New(nil)
	defer reg.Close()
	type rename struct {
		Name string `json:"name"`
	}
	_, _ = reg.Register(surface.Component{Type: "file", Description: "A file",
		Actions: map[string]surface.Capability{
			"rename": surface.Action(surface.ActionDef[rename, surface.None]{Description: "Renames the file",
				Effect: surface.EffectLocalState,
				Execute: func(context.Context, *surface.Call, rename) (surface.None, error) {
					return surface.None{}, nil
				}}),
		}})
	res := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "view:file.rename",
		Input: json.RawMessage(`{"name":42}`)}, surface.InvokeOptions{})
	for _, is := range res.Error.Issues() {
		fmt.Printf("in process:    %q %s\n", is.Path, is.Message)
	}

	b, _ := json.Marshal(res) // as an adapter sends it
	var received surface.Result
	_ = json.Unmarshal(b, &received)
	for _, is := range received.Error.Issues() {
		fmt.Printf("over the wire: %q %s\n", is.Path, is.Message)
	}
	// Output:
	// in process:    "name" expected string
	// over the wire: "name" expected string
}

// RetryAfter turns details.retryAfterMs into a duration, whatever number
// type the details hold.
func ExampleError_RetryAfter() {
	var received surface.Error
	_ = json.Unmarshal([]byte(`{"code":"RATE_LIMITED","message":"Too many calls right now.","retry":"after-delay",
		"details":{"reason":"rate","retryAfterMs":1500}}`), &received)
	if received.Code == surface.CodeRateLimited {
		fmt.Println(received.Reason(), received.RetryAfter())
	}
	// Output:
	// rate 1.5s
}
