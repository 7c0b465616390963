// Package agent holds what the devices console's agents share: the
// [Tools] an agent calls (an MCP client session or the page's embedded
// toolset), the [Runner] interface of an agent loop, and [Scripted], an
// agent that plays the console's demo task without a model, checking the
// outcome of every step.
//
// A transcript of a run is a sequence of [Step] values; [Transcript]
// prints them as a readable table.
package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// Tool is one tool an agent was shown.
type Tool struct {
	// Name is the wire name to call.
	Name string `json:"name"`
	// Description is the tool's stable description.
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the arguments.
	InputSchema json.RawMessage `json:"inputSchema"`
	// CapabilityID is the capability behind the tool
	// ("view:devices.table.selectRows").
	CapabilityID string `json:"capabilityId"`
	// Effect is the capability's effect ("local-state", "destructive", …).
	Effect string `json:"effect"`
	// Available and UnavailableReason are the tool's live state when it
	// was listed.
	Available         bool   `json:"available"`
	UnavailableReason string `json:"unavailableReason,omitempty"`
}

// Tools is what an agent calls. List returns the current catalog and makes
// it the one later calls refer to; Call calls one tool and returns the
// registry's result envelope. A non-nil error is a transport or protocol
// failure, not a capability error (those are results).
type Tools interface {
	List(ctx context.Context) ([]Tool, error)
	Call(ctx context.Context, name string, args json.RawMessage) (surface.Result, error)
}

// Step is one entry of an agent's transcript.
type Step struct {
	// N numbers the steps of a run from 1.
	N int `json:"n"`
	// Title says what the step is for ("filter to offline devices in London").
	Title string `json:"title"`
	// Tool is the tool called, or "tools/list" for a discovery.
	Tool string `json:"tool,omitempty"`
	// Args are the arguments sent, if any.
	Args json.RawMessage `json:"args,omitempty"`
	// Outcome is "ok", an error code, or a short note for non-calls. A
	// step with neither Tool nor Outcome is something the agent said: its
	// Title is the text.
	Outcome string `json:"outcome"`
	// Want is the outcome the step expected; empty when any is fine.
	Want string `json:"want,omitempty"`
	// Detail is a short human note: the output, the error message.
	Detail string `json:"detail,omitempty"`
	// Link is a link the step was given to hand to the user (an approve
	// page's, from CONFIRMATION_REQUIRED's details.approveUrl), whole.
	Link string `json:"link,omitempty"`
	// Duration is how long the step took.
	Duration time.Duration `json:"durationNs"`
}

// Expected reports whether the step got the outcome it wanted.
func (s Step) Expected() bool { return s.Want == "" || s.Want == s.Outcome }

// Runner is an agent loop: it works on prompt with tools and reports every
// step. It returns when the task is done, ctx ends, or it fails.
type Runner interface {
	Run(ctx context.Context, prompt string, tools Tools, report func(Step)) error
}

// Outcome is the outcome string of a result: "ok" or its error code.
func Outcome(res surface.Result) string {
	if res.Error != nil {
		return string(res.Error.Code)
	}
	return string(res.Status)
}
