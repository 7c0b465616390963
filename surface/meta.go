package surface

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Meta tool names and their capability ids in results.
const (
	MetaDiscover = "surface_discover"
	MetaRead     = "surface_read"
	MetaAct      = "surface_act"
)

// The meta tools' schemas are constant (semantics §16.3).
const (
	metaDiscoverSchema = `{"type":"object","properties":{"scope":{"type":"array","items":{"type":"string"},"description":"Component-type prefixes to narrow discovery to, e.g. [\"devices\"]. Omit for everything you may see."}},"additionalProperties":false}`
	metaReadSchema     = `{"type":"object","properties":{"capabilityId":{"type":"string","description":"The observation to read, e.g. \"view:devices.table.readState\"."},"instanceId":{"type":"string","description":"Which instance, when several are live."}},"required":["capabilityId"],"additionalProperties":false}`
	metaActSchema      = `{"type":"object","properties":{"capabilityId":{"type":"string","description":"The action or procedure to call, e.g. \"view:devices.table.selectRows\"."},"instanceId":{"type":"string","description":"Which instance, when several are live."},"input":{"type":"object","description":"The capability's input, matching its inputSchema from surface_discover."},"invocationId":{"type":"string","description":"Reuse to retry the same call safely."},"confirmationId":{"type":"string","description":"From CONFIRMATION_REQUIRED, once the user approved."},"surfaceVersion":{"type":"string","description":"The surfaceVersion you discovered."}},"required":["capabilityId"],"additionalProperties":false}`
)

func metaTools() []Tool {
	avail := ToolState{Available: true}
	readOnly := Declaration{Effect: EffectRead, Idempotent: true}
	return []Tool{
		{Name: MetaDiscover, Description: "[meta] List the capabilities you can use now: components with their observations and actions, and domain procedures, with schemas and availability.", InputSchema: metaDiscoverSchema, State: avail, Kind: KindObservation, Declaration: readOnly},
		{Name: MetaRead, Description: "[meta] Read an observation by capabilityId.", InputSchema: metaReadSchema, State: avail, Kind: KindObservation, Declaration: readOnly},
		{Name: MetaAct, Description: "[meta] Call an action or a domain procedure by capabilityId with its input.", InputSchema: metaActSchema, State: avail, Kind: KindAction},
	}
}

// metaFields are the arguments each verb accepts.
var metaFields = map[string][]string{
	MetaDiscover: {"scope"},
	MetaRead:     {"capabilityId", "instanceId"},
	MetaAct:      {"capabilityId", "instanceId", "input", "invocationId", "confirmationId", "surfaceVersion"},
}

// callMeta runs one meta tool call.
func (ts *Toolset) callMeta(ctx context.Context, name string, raw json.RawMessage, opts CallOptions) Result {
	toolCallID := opts.ToolCallID
	fields, known := metaFields[name]
	if !known {
		return ts.r.unknownTool(cmp.Or(toolCallID, ts.newID()), name)
	}
	args, issues := metaEnvelope(name, raw, fields)
	capID, _ := args["capabilityId"].(string)
	if len(issues) > 0 {
		if capID == "" {
			capID = "meta:surface." + strings.TrimPrefix(name, "surface_")
		}
		return Result{Status: StatusError, InvocationID: cmp.Or(toolCallID, ts.newID()), CapabilityID: capID,
			Error: NewError(CodeInvalidInput, envelopeMessage(name), map[string]any{"issues": issues}), SurfaceVersion: ts.r.Version()}
	}
	if name == MetaDiscover {
		return ts.discover(args)
	}
	snap := ts.r.Snapshot(SnapshotOptions{Consumer: ts.opts.Consumer, Scope: ts.opts.Scope})
	inv := Invocation{CapabilityID: capID}
	inv.InstanceID, _ = args["instanceId"].(string)
	var inputSchema JSONText
	inv.RegistrationID, inputSchema = uniqueMatch(snap, capID, inv.InstanceID)
	if name == MetaRead {
		inv.InvocationID, inv.SurfaceVersion = cmp.Or(toolCallID, ts.newID()), snap.SurfaceVersion
		return ts.invoke(ctx, inv, opts.Client)
	}
	sentID, _ := args["invocationId"].(string)
	inv.InvocationID = cmp.Or(sentID, toolCallID, ts.newID())
	inv.ConfirmationID, _ = args["confirmationId"].(string)
	inv.ConfirmationID = cmp.Or(inv.ConfirmationID, opts.ConfirmationID)
	sentVersion, _ := args["surfaceVersion"].(string)
	inv.SurfaceVersion = cmp.Or(sentVersion, snap.SurfaceVersion)
	if in, ok := args["input"]; ok {
		if s, isString := in.(string); isString && isObjectSchema(inputSchema) {
			// A model that sent the input as a JSON string: repaired only for
			// object targets, and only when the string is a JSON object.
			var obj map[string]any
			if json.Unmarshal([]byte(s), &obj) == nil && obj != nil {
				ts.r.opts.Logger.Warn("surface: surface_act input was a JSON-encoded string, not an object; decoded it",
					"capabilityId", capID, "invocationId", inv.InvocationID)
				in = obj
			}
		}
		b, _ := json.Marshal(in)
		inv.Input = b
	}
	return capabilitySchemaMessage(ts.invoke(ctx, inv, opts.Client))
}

// envelopeMessage is the message of a meta call whose own arguments are
// malformed: the mistake is in the envelope, not in a capability's input.
func envelopeMessage(name string) string {
	if name == MetaAct {
		return "The surface_act arguments are malformed (see details.issues): surface_act takes capabilityId, " +
			"optional instanceId, invocationId, confirmationId and surfaceVersion, and the capability's own input as the object \"input\"."
	}
	return "The " + name + " arguments are malformed; see details.issues."
}

// capabilitySchemaMessage says, for surface_act, that an INVALID_INPUT
// with issues comes from the capability's input schema (the envelope was
// valid), so the model fixes "input" rather than the envelope.
func capabilitySchemaMessage(res Result) Result {
	if res.Error == nil || res.Error.Code != CodeInvalidInput || len(res.Error.Issues()) == 0 {
		return res
	}
	res.Error.Message = "The input does not match the capability's inputSchema (from surface_discover); " +
		"see details.issues, whose paths are inside \"input\"."
	return res
}

// isObjectSchema reports whether a schema's root type is "object".
func isObjectSchema(s JSONText) bool {
	var doc struct {
		Type any `json:"type"`
	}
	return json.Unmarshal([]byte(s), &doc) == nil && doc.Type == "object"
}

// metaEnvelope checks a meta call's arguments before anything reaches the
// registry: absent, null or an object; required fields present; no
// unknown fields; strings non-empty; scope an array of strings. The act
// verb's input is not checked here (the registry validates it).
func metaEnvelope(name string, raw json.RawMessage, fields []string) (map[string]any, []Issue) {
	args := map[string]any{}
	if t := strings.TrimSpace(string(raw)); t != "" && t != "null" {
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return map[string]any{}, []Issue{{Path: "", Message: "arguments must be a JSON object"}}
		}
	}
	var issues []Issue
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if !slices.Contains(fields, k) {
			msg := "unexpected property of the " + name + " arguments"
			if name == MetaAct {
				msg += `; the capability's own input goes inside "input", e.g. {"capabilityId": "…", "input": {"` + k + `": …}}`
			}
			issues = append(issues, Issue{Path: k, Message: msg})
		}
	}
	if name != MetaDiscover {
		if _, ok := args["capabilityId"]; !ok {
			msg := `missing required property "capabilityId" of the ` + name + " arguments"
			if name == MetaAct {
				msg += `; name the capability in "capabilityId" and put its own input inside "input"`
			}
			issues = append(issues, Issue{Path: "capabilityId", Message: msg})
		}
	}
	for _, k := range fields {
		v, ok := args[k]
		switch {
		case !ok || k == "input":
		case k == "scope":
			list, isList := v.([]any)
			if !isList {
				issues = append(issues, Issue{Path: "scope", Message: "expected an array of strings"})
				break
			}
			for i, x := range list {
				if s, isStr := x.(string); !isStr || s == "" {
					issues = append(issues, Issue{Path: "scope[" + strconv.Itoa(i) + "]", Message: "expected a non-empty string"})
				}
			}
		default:
			if s, isStr := v.(string); !isStr || s == "" {
				issues = append(issues, Issue{Path: k, Message: "expected a non-empty string"})
			}
		}
	}
	if name == MetaAct {
		if in, ok := args["input"]; ok {
			switch in.(type) {
			case map[string]any, string:
			default:
				issues = append(issues, Issue{Path: "input", Message: `expected "input" to be an object: the capability's input`})
			}
		}
	}
	return args, issues
}

// discover answers surface_discover: a snapshot under the scope floor,
// narrowed by the model's scope, never widened (semantics §16.3).
func (ts *Toolset) discover(args map[string]any) Result {
	var requested []string
	if list, ok := args["scope"].([]any); ok {
		for _, x := range list {
			requested = append(requested, x.(string))
		}
	}
	scope, rejected, empty := intersectScope(ts.opts.Scope, requested)
	if empty {
		scope = []string{"\x00none"} // a prefix no component type has
	}
	snap := ts.r.Snapshot(SnapshotOptions{Consumer: ts.opts.Consumer, Scope: scope, Budget: ts.opts.Budget})
	body, _ := json.Marshal(snap)
	if len(rejected) > 0 {
		extra, _ := json.Marshal(map[string]any{"prefixes": rejected})
		body = append(append(append(body[:len(body)-1], `,"scopeRejected":`...), extra...), '}')
	}
	return Result{Status: StatusOK, InvocationID: newInvocationID(), CapabilityID: "meta:surface.discover",
		Output: JSONText(body), SurfaceVersion: snap.SurfaceVersion}
}

// intersectScope narrows the floor by the request. It returns the
// effective prefixes, the requested prefixes that admit nothing (request
// order, deduplicated), and whether the intersection is empty.
func intersectScope(floor, requested []string) (scope, rejected []string, empty bool) {
	switch {
	case len(requested) == 0:
		return floor, nil, false
	case len(floor) == 0:
		return slices.Compact(slices.Clone(requested)), nil, false
	}
	add := func(list []string, s string) []string {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
		return list
	}
	for _, r := range requested {
		admitted := false
		for _, f := range floor {
			switch {
			case r == f || strings.HasPrefix(r, f+"."):
				scope, admitted = add(scope, r), true
			case strings.HasPrefix(f, r+"."):
				scope, admitted = add(scope, f), true
			}
		}
		if !admitted {
			rejected = add(rejected, r)
		}
	}
	return scope, rejected, len(scope) == 0
}

// uniqueMatch returns the registration id and input schema of the only
// descriptor (of any kind) matching the id and instance, or "" when there
// is none or several: the registry then decides.
func uniqueMatch(snap Snapshot, capID, instance string) (string, JSONText) {
	regID, schema, n := "", JSONText(""), 0
	for _, c := range snap.Components {
		if instance != "" && c.InstanceID != instance {
			continue
		}
		for _, o := range c.Observations {
			if o.CapabilityID == capID {
				regID, schema, n = c.RegistrationID, emptyObject, n+1
			}
		}
		for _, a := range c.Actions {
			if a.CapabilityID == capID {
				regID, schema, n = c.RegistrationID, a.InputSchema, n+1
			}
		}
	}
	for _, p := range snap.Procedures {
		if p.ProcedureID == capID && (instance == "" || p.Context != nil && p.Context.InstanceID == instance) {
			regID, schema, n = p.RegistrationID, p.InputSchema, n+1
		}
	}
	if n != 1 {
		return "", ""
	}
	return regID, schema
}
