package console

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/agentsurface/agentsurface/surface"
)

// shownCatalog is the catalog of tools an agent was last shown. An agent
// acts on what it saw (DESIGN decision 16): when a tool's registration
// has been unmounted or replaced since, a call of that tool goes to the
// registration the agent was shown, and the registry answers
// COMPONENT_UNMOUNTED or STALE_CAPABILITY; the agent lists the tools again.
// Without this, a call would silently reach whatever now carries the name,
// such as the detail panel of another device.
//
// Toolsets and mcpsurface servers follow the live catalog; the console
// pins what each agent was shown with a shownCatalog.
type shownCatalog struct {
	mu    sync.Mutex
	tools map[string]surface.Tool // by name
}

// record makes tools the catalog the agent was shown.
func (c *shownCatalog) record(tools []surface.Tool) {
	m := make(map[string]surface.Tool, len(tools))
	for _, t := range tools {
		m[t.Name] = t
	}
	c.mu.Lock()
	c.tools = m
	c.mu.Unlock()
}

// lookup returns the tool called name as it was shown.
func (c *shownCatalog) lookup(name string) (surface.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tools[name]
	return t, ok
}

// staleCall calls the registration the agent was shown for tool name when
// the current catalog no longer has it: the registry then refuses the
// call at resolution (it cannot execute), and its answer is the result.
// It reports false when the shown registration is still live, or when the
// agent was never shown name: the call proceeds as usual.
func staleCall(ctx context.Context, reg *surface.Registry, consumer surface.Consumer, shown *shownCatalog, current func() []surface.Tool, name string, args json.RawMessage) (surface.Result, bool) {
	t, ok := shown.lookup(name)
	if !ok || t.RegistrationID == "" {
		return surface.Result{}, false
	}
	for _, c := range current() {
		if c.RegistrationID == t.RegistrationID && c.CapabilityID == t.CapabilityID {
			return surface.Result{}, false // still live
		}
	}
	inv := surface.Invocation{CapabilityID: t.CapabilityID, RegistrationID: t.RegistrationID}
	if t.Kind != surface.KindObservation {
		inv.Input = args
	}
	return reg.Invoke(ctx, inv, surface.InvokeOptions{Consumer: consumer}), true
}
