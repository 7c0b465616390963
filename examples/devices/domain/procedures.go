package domain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentsurface/agentsurface/surface"
)

// Procedure paths served by [Procedures], and the capability ids of the
// references to them.
const (
	ListPath    = "devices.list"
	DisablePath = "devices.disable"
	EnablePath  = "devices.enable"
	ListID      = "domain:" + ListPath
	DisableID   = "domain:" + DisablePath
	EnableID    = "domain:" + EnablePath
)

// ListInput is the input of "devices.list". Zero fields select everything.
type ListInput struct {
	Status string `json:"status,omitempty" jsonschema:"Only devices with this status: online, offline or disabled."`
	Site   string `json:"site,omitempty" jsonschema:"Only devices at this site, such as Amsterdam (case-insensitive)."`
	Query  string `json:"query,omitempty" jsonschema:"Only devices whose name or id contains this text (case-insensitive)."`
}

// ListOutput is the output of "devices.list".
type ListOutput struct {
	Devices []Device `json:"devices"`
}

// DisableInput is the input of "devices.disable".
type DisableInput struct {
	IDs    []string `json:"ids" jsonschema:"Ids of the devices to disable."`
	Reason string   `json:"reason" jsonschema:"Why the devices are disabled; recorded in the audit log."`
}

// DisableOutput is the output of "devices.disable".
type DisableOutput struct {
	// Disabled counts the devices the call disabled.
	Disabled int `json:"disabled"`
}

// EnableInput is the input of "devices.enable".
type EnableInput struct {
	IDs    []string `json:"ids" jsonschema:"Ids of the devices to enable."`
	Reason string   `json:"reason" jsonschema:"Why the devices are enabled; recorded in the audit log."`
}

// EnableOutput is the output of "devices.enable".
type EnableOutput struct {
	// Enabled counts the devices the call enabled.
	Enabled int `json:"enabled"`
}

// Messages shown to agents. They are fixed: domain and database error
// texts never reach the agent.
const (
	msgRejected  = "The device service rejected the input; see details.issues."
	msgUnknownID = "unknown device id"
)

// ProcedureOptions configure [Procedures]. A nil *ProcedureOptions is the
// zero value, which is valid.
type ProcedureOptions struct {
	// Consumer returns the consumer whose invocation id a call carries:
	// the scope of the call's idempotency key ([Key.Consumer]). The
	// default is call.Consumer.Key(), the consumer as the registry names
	// it, which is enough when one registry serves every consumer of the
	// store. The registry keeps the ids of each of its consumers apart
	// from those of other consumers and other registries (a registry per
	// browser session names every session's agent alike), so a host with
	// several registries on one store must qualify the key with what
	// tells its registries apart, such as the session.
	Consumer func(call *surface.ProcedureCall) string
}

// Procedures returns the in-process executor of the devices domain
// service, exposing "devices.list" (a server query), "devices.disable"
// (destructive) and "devices.enable" (a server mutation) on store. Install
// it with [surface.Registry.SetProcedureExecutor]. opts may be nil.
//
// Each call reads the acting user from call.Host ([UserFromHost]) and lets
// the store check that user's permission: the client-side policies and
// the confirmation evidence are never taken as authority. Outcomes map to
// agent errors with fixed texts: no user is NOT_AUTHENTICATED; a refusal
// is NOT_AUTHORIZED with details.origin "server"; unknown ids and invalid
// arguments are INVALID_INPUT with details.issues (one per unknown id at
// "ids[<index>]", the spec's issue path format); any other failure is returned as a plain error, which
// the registry reports as a sanitised EXECUTION_FAILED.
//
// "devices.disable" and "devices.enable" pass call.InvocationID to the
// store as the idempotency key of the call's consumer
// (ProcedureOptions.Consumer; see [Store.DisableOnce]): a retry by the
// same consumer with the same invocation id executes once, on whichever
// replica it lands, and returns the first call's output; that consumer's
// id reused for a different request is INVOCATION_CONFLICT with
// details.reason "id-reused-with-different-request". Another consumer's
// call with the same id is unrelated to it: it executes, and learns
// nothing of the first.
func Procedures(store *Store, opts *ProcedureOptions) *surface.FuncExecutor {
	consumer := func(call *surface.ProcedureCall) string { return call.Consumer.Key() }
	if opts != nil && opts.Consumer != nil {
		consumer = opts.Consumer
	}
	key := func(call *surface.ProcedureCall) Key {
		return Key{Consumer: consumer(call), ID: invocationKey(call.InvocationID)}
	}
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, ListPath, func(ctx context.Context, call *surface.ProcedureCall, in ListInput) (ListOutput, error) {
		u, ok := UserFromHost(call.Host)
		if !ok {
			return ListOutput{}, surface.NewError(surface.CodeNotAuthenticated, "", nil)
		}
		devices, err := store.List(ctx, u, Filter{Status: Status(in.Status), Site: in.Site, Query: in.Query})
		if err != nil {
			return ListOutput{}, agentError(err, nil)
		}
		return ListOutput{Devices: devices}, nil
	})
	surface.AddFunc(x, DisablePath, func(ctx context.Context, call *surface.ProcedureCall, in DisableInput) (DisableOutput, error) {
		u, ok := UserFromHost(call.Host)
		if !ok {
			return DisableOutput{}, surface.NewError(surface.CodeNotAuthenticated, "", nil)
		}
		res, err := store.DisableOnce(ctx, u, key(call), in.IDs, in.Reason)
		if err != nil {
			return DisableOutput{}, agentError(err, in.IDs)
		}
		return DisableOutput{Disabled: res.Disabled}, nil
	})
	surface.AddFunc(x, EnablePath, func(ctx context.Context, call *surface.ProcedureCall, in EnableInput) (EnableOutput, error) {
		u, ok := UserFromHost(call.Host)
		if !ok {
			return EnableOutput{}, surface.NewError(surface.CodeNotAuthenticated, "", nil)
		}
		res, err := store.EnableOnce(ctx, u, key(call), in.IDs, in.Reason)
		if err != nil {
			return EnableOutput{}, agentError(err, in.IDs)
		}
		return EnableOutput{Enabled: res.Enabled}, nil
	})
	return x
}

// invocationKey returns the store's idempotency key id for an invocation
// id: the id itself, or, when the store would refuse it (longer than
// MaxKeyLength, not UTF-8 text), a digest of it, so that any id the agent
// chose still deduplicates.
func invocationKey(id string) string {
	if checkID(id) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// agentError maps a store error to what the agent may see; ids are the
// ids of the call, to locate unknown ones. Errors it does not recognise
// are returned unchanged, for the operator's log.
func agentError(err error, ids []string) error {
	var nf *NotFoundError
	var bad *InvalidError
	switch {
	case errors.Is(err, ErrForbidden):
		return surface.NewError(surface.CodeNotAuthorized, "", map[string]any{"origin": "server"})
	case errors.Is(err, ErrKeyReused):
		return surface.NewError(surface.CodeInvocationConflict, "", map[string]any{"reason": "id-reused-with-different-request"})
	case errors.As(err, &nf):
		var issues []surface.Issue
		for i, id := range ids {
			if slices.Contains(nf.IDs, id) {
				issues = append(issues, surface.Issue{Path: fmt.Sprintf("ids[%d]", i), Message: msgUnknownID})
			}
		}
		if len(issues) == 0 {
			issues = []surface.Issue{{Path: "ids", Message: msgUnknownID}}
		}
		return surface.NewError(surface.CodeInvalidInput, msgRejected, map[string]any{"issues": issues})
	case errors.As(err, &bad):
		// Field and Problem are fixed texts of this package.
		return surface.NewError(surface.CodeInvalidInput, msgRejected, map[string]any{"issues": []surface.Issue{{Path: bad.Field, Message: bad.Problem}}})
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalid):
		return surface.NewError(surface.CodeInvalidInput, msgRejected, map[string]any{"issues": []surface.Issue{{Path: "", Message: "the input was rejected"}}})
	}
	return err
}

// Agent-visible texts of the references. They are stable: live context
// belongs in Describe.
const (
	disableDescription = "Disable devices. A disabled device stops serving and is skipped by rollouts until an operator enables it again. " +
		"Needs a reason, which is recorded in the audit log with the acting user."
	enableDescription = "Enable disabled devices again; they come back offline until they next report in. " +
		"Needs a reason, which is recorded in the audit log with the acting user."
	listDescription = "List devices, optionally filtered by status, site or a text query on name and id."
	// NothingSelected is why the disable reference is unavailable while
	// its binding selects no device.
	NothingSelected = "No devices are selected; select devices in the table first."
)

// disableSchema returns the input schema of "devices.disable": the shape of
// DisableInput with the domain's limits, so that a bad input fails before
// anyone is asked to approve it. TestSchemasMatchTypes keeps the two
// aligned.
func disableSchema() json.RawMessage { return transitionSchema("disable") }

// enableSchema returns the input schema of "devices.enable", the shape of
// EnableInput.
func enableSchema() json.RawMessage { return transitionSchema("enable") }

// transitionSchema is the input schema of the procedure that does verb
// ("disable" or "enable") to devices.
func transitionSchema(verb string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{
	"type": "object",
	"properties": {
		"ids": {
			"type": "array",
			"description": "Ids of the devices to %[4]s.",
			"items": {"type": "string", "minLength": 1, "maxLength": %[1]d},
			"minItems": 1,
			"maxItems": %[2]d
		},
		"reason": {
			"type": "string",
			"description": "Why the devices are %[4]sd; recorded in the audit log.",
			"pattern": "\\S",
			"maxLength": %[3]d
		}
	},
	"required": ["ids", "reason"],
	"additionalProperties": false
}`, MaxIDLength, MaxIDs, MaxReasonLength, verb))
}

// listSchema returns the input schema of "devices.list", the shape of
// ListInput with the domain's limits.
func listSchema() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{
	"type": "object",
	"properties": {
		"status": {
			"type": "string",
			"description": "Only devices with this status: online, offline or disabled.",
			"enum": ["online", "offline", "disabled"]
		},
		"site": {
			"type": "string",
			"description": "Only devices at this site, such as Amsterdam (case-insensitive).",
			"maxLength": %d
		},
		"query": {
			"type": "string",
			"description": "Only devices whose name or id contains this text (case-insensitive).",
			"maxLength": %d
		}
	},
	"additionalProperties": false
}`, MaxQueryLength, MaxQueryLength))
}

// DisableRef returns the procedure reference "domain:devices.disable"
// (destructive: every call needs the user's confirmation) for a UI
// component to list in Component.Procedures.
//
// bind returns the live UI state the call is bound to, as
// map[string]any{"ids": the selected device ids ([]string)}; the ids are
// declared bound and locked: hidden from the agent's schema, rejected if
// the agent sends them (even while bind fails), read again at every call
// and part of what the user approves. The
// agent supplies only the reason. While bind selects no id the reference
// is unavailable ([NothingSelected]). describe, if set, returns a live
// note such as "3 devices selected".
//
// A nil bind leaves ids to the agent.
func DisableRef(bind func(ctx context.Context) (map[string]any, error), describe func() string) surface.Capability {
	return DisableRefWithGrants(bind, describe, surface.GrantRule{})
}

// DisableRefWithGrants is [DisableRef] opted into standing grants within
// grants (surface.GrantRule): a person approving a disable may also let
// later disables of the same consumer, within the constraints the host
// derives from the approved input (these devices, this reason), skip
// the question for a while. Disable is destructive, so grants must name
// their ceiling, MaxTTL and MaxUses (Register refuses the reference
// otherwise); the zero GrantRule is DisableRef. The domain service still
// re-checks the user's permission on every call, grant or not.
func DisableRefWithGrants(bind func(ctx context.Context) (map[string]any, error), describe func() string, grants surface.GrantRule) surface.Capability {
	def := surface.ProcedureDef[DisableInput, DisableOutput]{
		ID:          DisableID,
		Description: disableDescription,
		InputSchema: disableSchema(),
		Effect:      surface.EffectDestructive,
		Bind:        bind,
		Describe:    describe,
		Grants:      grants,
	}
	if bind != nil {
		def.Bound = []string{"ids"}
		def.When = func() bool { return selected(bind) != 0 }
		def.UnavailableReason = NothingSelected
	}
	return surface.Procedure(def)
}

// selected returns how many ids bind selects now, or -1 when it cannot
// tell (bind failed or returned something else); the invocation then
// reports the binding failure itself.
func selected(bind func(ctx context.Context) (map[string]any, error)) int {
	vals, err := bind(context.Background())
	if err != nil {
		return -1
	}
	switch ids := vals["ids"].(type) {
	case nil:
		return 0
	case []string:
		return len(ids)
	case []any:
		return len(ids)
	}
	return -1
}

// EnableRef returns the procedure reference "domain:devices.enable" (a
// server mutation: reversible, no confirmation by default) for a UI
// component to list in Component.Procedures. bind and describe work as for
// [DisableRef]; while bind selects no id the reference is unavailable
// ([NothingSelected]).
func EnableRef(bind func(ctx context.Context) (map[string]any, error), describe func() string) surface.Capability {
	def := surface.ProcedureDef[EnableInput, EnableOutput]{
		ID:          EnableID,
		Description: enableDescription,
		InputSchema: enableSchema(),
		Effect:      surface.EffectServerMutation,
		Bind:        bind,
		Describe:    describe,
	}
	if bind != nil {
		def.Bound = []string{"ids"}
		def.When = func() bool { return selected(bind) != 0 }
		def.UnavailableReason = NothingSelected
	}
	return surface.Procedure(def)
}

// ListRef returns the procedure reference "domain:devices.list" (a
// server query, no confirmation) for a UI component to list in
// Component.Procedures.
func ListRef() surface.Capability {
	return surface.Procedure(surface.ProcedureDef[ListInput, ListOutput]{
		ID:          ListID,
		Description: listDescription,
		InputSchema: listSchema(),
		Effect:      surface.EffectServerQuery,
	})
}
