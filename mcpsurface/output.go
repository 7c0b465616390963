package mcpsurface

import (
	"encoding/json"

	"github.com/agentsurface/agentsurface/internal/schema"
	"github.com/agentsurface/agentsurface/surface"
)

// A tool's outputSchema describes what its structuredContent always is:
// the registry's result envelope, with the capability's own output schema
// under "output" (any value for the meta tools, which reach many
// capabilities). It holds for error results too, whose "error" is the
// agent-facing payload. The output schema is shown portable
// (schema.Portable), as the input schema is. The schema is written once
// per tool definition, which an HTTPHandler's servers share (toolDefs):
// not again for every server that adds the tool, nor for every
// tools/list.

// envelopeRetries are the retry categories an error carries.
var envelopeRetries = []surface.Retry{
	surface.RetryNo, surface.RetryYes, surface.RetryAfterRefresh,
	surface.RetryAfterDelay, surface.RetryWithConfirmation, surface.RetryWithChanges,
}

// envelopeSchema is the output schema of a tool whose capability's output
// schema is output: "" for a capability without output, nil for any
// output (meta tools). The capability schema's $defs move to the root, so
// that its internal references still resolve; its $schema and $id go.
func envelopeSchema(output surface.JSONText, anyOutput bool) json.RawMessage {
	str := map[string]any{"type": "string"}
	props := map[string]any{
		"status":         map[string]any{"enum": []surface.ResultStatus{surface.StatusOK, surface.StatusError}},
		"invocationId":   str,
		"capabilityId":   str,
		"surfaceVersion": str,
		"surfaceChanged": map[string]any{"type": "boolean"},
		"error": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"code":    str,
				"message": str,
				"retry":   map[string]any{"enum": envelopeRetries},
				"details": map[string]any{"type": "object"},
			},
			"required": []string{"code", "message", "retry"},
		},
	}
	root := map[string]any{
		"type":       "object",
		"properties": props,
		"required":   []string{"status", "invocationId", "capabilityId", "surfaceVersion"},
		// An error result carries the error, an ok one none.
		"if":   map[string]any{"properties": map[string]any{"status": map[string]any{"const": surface.StatusError}}},
		"then": map[string]any{"required": []string{"error"}},
		"else": map[string]any{"not": map[string]any{"required": []string{"error"}}},
	}
	switch {
	case anyOutput:
		props["output"] = json.RawMessage(schema.Portable([]byte(`{}`)))
	case output != "":
		var o map[string]json.RawMessage
		if json.Unmarshal([]byte(output), &o) == nil {
			if defs, ok := o["$defs"]; ok {
				root["$defs"] = defs
			}
			delete(o, "$defs")
			delete(o, "$schema")
			delete(o, "$id")
			props["output"] = o
		}
	}
	b, _ := json.Marshal(root)
	return b
}
