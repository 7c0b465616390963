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
//     (effect [EffectLocalState] or [EffectNavigation]), with typed input and output.
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
// # Invocations
//
// [Registry.Invoke] runs every call through one fixed pipeline: identity
// (an invocation id, scoped by consumer, joins or replays an identical
// request and conflicts with a different one), resolution among the
// capabilities the consumer sees (stale registration ids, tombstones of
// unmounted components, ambiguous instances; see Visibility),
// availability, authorization, the effective input (validated
// against the schema), invoke policies and confirmation, precondition,
// admission (actions queue per instance unless their [Concurrency] says
// otherwise; reads share a bounded pool),
// execution (on the caller's goroutine, or its own with
// [Options.IsolateHandlers]; bounded by a timeout, cancelled on unmount or
// Close) and settlement. The first failing phase decides; the
// [Result] is the spec's envelope, and a failure is an agent-safe [*Error]
// with a retry category. Causes stay in the operator's log.
//
// A client reads an error's details through the accessors of [*Error]
// ([Error.Reason], [Error.Issues], [Error.Instances], [Error.RetryAfter],
// [Error.ConfirmationID], [Error.Summary], …), never by key: they return
// the same values for an error made in process and for one decoded from
// JSON, whose details hold []any and float64.
//
// # Policies
//
// A [Policy] can hide a capability from a consumer (it then does not
// exist for them, at discovery and at invocation alike; see Visibility),
// disable it with a reason, authorize calls before any input is read, and
// inspect the validated input afterwards. Attach policies to the
// registry, a component or a capability. Built-ins: [Authenticated],
// [HasPermission], [TenantBoundary], [OnlyIn], [RateLimit],
// [RequireConfirmation], [Audit].
//
// # Visibility
//
// What a consumer sees of a capability is decided in one place, for
// snapshots, explanations, invocations, toolsets and the MCP adapter
// alike: hidden when a [Policy] of its chain hides it from the consumer;
// else unavailable with the first disabling policy's reason when one
// disables it; else unavailable with the state's reason (a disabled
// component, a pushed override, a false When); else available.
//
// Hidden means nonexistent. For a consumer C and a capability hidden from
// C, every [Result] C can obtain — code, message, retry and details — and
// every side effect C can observe — its idempotency entries, rate-limit
// tokens, pending confirmations, and the events and audit records of its
// calls — are those of a capability that was never registered, apart
// from the ids C itself sent. Invoke drops what C cannot see before it
// decides anything else, so:
//
//   - AMBIGUOUS_INSTANCE lists only instances C sees, and a call without
//     an instance id that C sees one instance of simply resolves to it;
//   - STALE_CAPABILITY names a liveRegistrationId only when C sees that
//     live registration;
//   - hidden beats disabled and unavailable: C gets CAPABILITY_NOT_FOUND,
//     never CAPABILITY_NOT_AVAILABLE and its reason;
//   - a tombstone answers COMPONENT_UNMOUNTED only to a consumer that
//     could have discovered what it remembers. The rule: a call presenting
//     the registration id of an unmounted registration gets
//     COMPONENT_UNMOUNTED (or registration-replaced) only if C would see
//     that registration were it still live — it had no capability, or C
//     sees at least one of them; a call naming no registration gets it
//     only if C would see the capability it names on an unmounted
//     registration. The tombstone keeps, for the time it lives, what
//     deciding that takes (the capabilities' kinds, effects and meta, the
//     component's meta and internal metadata, the policy chains), never a
//     handler; "would see" is judged with the consumer and host context of
//     the call.
//
// The same holds for procedure references and for the meta tools, which
// look capabilities up in C's snapshot and call Invoke. A call naming a
// hidden capability is refused at resolution, as one naming nothing: its
// audit record has no registration id (operators who want to know why
// ask [Registry.Explain]).
//
// What is shared by every consumer is not hidden: the surface version
// counts every mutation, hidden ones included, and the registry-wide
// bounds (the tombstones kept, the idempotency cache's eviction order, the
// confirmation store, the observation pool) are spent by every consumer's
// activity. These say that something happened, never what.
//
// [Registry.Explain] tells a developer why a capability is missing or
// disabled for a consumer: every capability in scope, hidden ones
// included, with the layer and vote of each policy of its chain and the
// consumer view: hidden, disabled by a policy, unavailable in the current
// state, or available ([View]). It is for developers, tests and
// operator tools; no agent-facing path reaches it.
//
// # Confirmation
//
// A capability whose confirmation level is required (declared, or
// escalated by [RequireConfirmation]) answers its first call with
// CONFIRMATION_REQUIRED and a pending record in
// [Registry.Confirmations]; the host shows it to the user and resolves it.
// The retry carries the confirmationId: evidence is single use, expires,
// and is bound to the surface, registration, capability, consumer, effect
// and the exact effective input, so an approval cannot be replayed or
// switched to other inputs. An adapter whose consumer has several clients
// (MCP sessions) names the calling one in [InvokeOptions].Client: the
// evidence then binds to that client too.
//
// The person may be reached in several ways, all resolving that one
// record (same digest binding, single use, TTL, audit): the host's own
// page, an approve page the host serves, reached by URL-mode elicitation
// or by a link in the answer, a form the client shows, an out-of-band
// notifier; [Resolution].Channel records which. The registry knows no
// URLs: an adapter that has the host's approve link for a pending record
// adds it to CONFIRMATION_REQUIRED as details.approveUrl
// ([Error.WithApproveURL], read with [Error.ApproveURL]), beside the
// details the error matrix names, and the agent hands it to the user.
//
// # Standing grants
//
// A person who approves may also allow "this, for ten minutes": the host
// makes a standing grant ([Registry.Grants], or in one step with the
// approval, [Confirmations.ResolveGrant]) for one consumer (or all of
// them) and one capability, optionally one instance, with constraints on
// the effective input ([ValueIn], [InRange], [HasPrefix], [OnlyKeys]), a
// TTL and a number of uses. A later call that would ask, presents no
// evidence and fits a live grant runs without asking; its result and its
// settled audit record name the grant (grantId), and every other phase
// runs as before. A capability opts in with its definition's Grants
// ([GrantRule]); destructive and external-side-effect ones name a
// ceiling. Deny > ask > grant: a denying policy, and a RequireConfirmation
// without a condition or with [AlwaysAsk], win over any grant. No agent
// path creates, widens or presents a grant; creation, refusal, use,
// revocation and expiry are audited.
//
// # Procedures
//
// [Procedure] references an existing domain operation, executed by the
// [ProcedureExecutor] installed with [Registry.SetProcedureExecutor]
// (in process with [FuncExecutor], or over HTTP with package httpexec).
// Part of its input can be bound to live UI state: bound fields are read
// at every call, locked fields are hidden from the agent, and the merged
// input is validated before confirmation, so the user approves exactly
// what executes. The domain side re-checks authority on every call.
//
// # Toolsets
//
// [NewToolset] projects the surface into tools for a model loop: one tool
// per capability (wire-safe names, stable descriptions, live state) or
// three generic meta tools. Embedded loops wait for confirmations; remote
// loops get CONFIRMATION_REQUIRED and retry with [CallOptions].ConfirmationID,
// or, with [ToolsetOptions].RememberConfirmations, by calling again.
// A model acts on what it was shown: [Toolset.Catalog] returns the tools
// as a [Catalog] whose Call targets the registration and surface version
// of each entry, so a call through a stale catalog is refused
// (STALE_CAPABILITY, COMPONENT_UNMOUNTED) instead of reaching whatever
// carries the name now.
//
// # Events and audit
//
// [Registry.Subscribe] delivers [Event] values in emission order, after
// the mutation, one at a time; see Subscribe for the exact guarantees.
// [Registry.SubscribeTo] follows some event types only (a toolset follows
// surface changes), and events nobody follows cost nothing.
// [Registry.Batch] groups a burst of mutations so that it yields one
// surface-changed with the final version.
// Audit records go to [Options.Audit] ([MemorySink] by default; see also
// [SlogSink] and [AsyncSink]).
//
// # Concurrency
//
// A Registry is safe for concurrent use. It never calls user code — When
// predicates, guards, listeners, providers — while holding its lock, so
// user code may call back into the registry.
package surface
