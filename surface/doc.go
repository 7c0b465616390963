// Package surface is the agentsurface runtime: an application declares, in
// code, exactly which capabilities of its live state an AI agent may use,
// and the registry governs every call.
//
// Nothing unregistered exists for the agent. What is registered is typed,
// described, and lives exactly as long as the component that registered it.
//
// # Components and capabilities
//
// A [Component] is anything with a lifecycle: a server-side page or view,
// a TUI screen, a job. It has a type ("devices.table"), an instance id
// derived from data, a description, and capabilities:
//
//   - observations, built with [Observation]: side-effect-free reads of
//     live state, with a typed output;
//   - actions, built with [Action]: changes of view or session state
//     (effect [LocalState] or [Navigation]), with typed input and output.
//
// Capability ids are "view:<type>.<name>" ("view:devices.table.selectRows").
// Input and output schemas are inferred from the Go types (json tags; a
// `jsonschema` struct tag gives descriptions) or given as raw JSON Schema;
// either way they must fit a small, LLM-friendly subset of JSON Schema,
// checked at registration.
//
//	reg := surface.New(nil)
//	defer reg.Close()
//	h, err := reg.Register(surface.Component{
//		Type:        "devices.table",
//		InstanceID:  "main",
//		Description: "Devices table",
//		Observations: map[string]surface.Capability{
//			"readState": surface.Observation(surface.ObservationDef[TableState]{
//				Description: "Visible rows and selection",
//				Read: func(ctx context.Context, call *surface.Call) (TableState, error) {
//					return table.State(), nil
//				},
//			}),
//		},
//	})
//	if err != nil { // a *surface.DefinitionError: a bug in the definition
//		return err
//	}
//	defer h.Unregister()
//
// # Lifecycle and versions
//
// [Registry.Register] makes a component live at once; [Handle.Unregister]
// (or the end of the context given to [Registry.RegisterContext]) removes
// it and leaves a tombstone, so late calls learn the component unmounted.
// The structure of a registration is frozen: to change descriptions,
// schemas or effects, register again (a new registration id). Only the
// disabled flag and availability overrides are pushed with
// [Handle.Update]; [Handle.Refresh] re-evaluates When predicates and pushes
// what flipped.
//
// Every surface-affecting mutation bumps the surface version by one
// (register, unregister, replace, a changing update, invalidate). Handler
// swaps and lazy When drift do not.
//
// # Snapshots
//
// [Registry.Snapshot] returns the catalog a consumer may see: components by
// priority, type and instance, their capabilities by name, availability
// with reasons. It never runs Read handlers and is safe to call often; the
// result is a copy the caller may keep or change. Its JSON uses the field
// names of the agent-surface specification, so Go and TypeScript
// implementations read each other's payloads.
//
// # Events
//
// [Registry.Subscribe] delivers [Event] values in mutation order, after
// the mutation, one at a time; see Subscribe for the exact guarantees.
//
// # Concurrency
//
// A Registry is safe for concurrent use. It never calls user code — When
// predicates, guards, listeners, providers — while holding its lock, so
// user code may call back into the registry.
package surface
