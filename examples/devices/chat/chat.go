// Package chat is the devices console's model loop: an [agent.Runner]
// that lets a model behind any OpenAI-compatible chat-completions endpoint
// (OpenAI, a local Ollama or vLLM) operate the console's tools, through a
// small client of that one API over net/http.
//
// Each turn sends the current catalog (so the model always sees the live
// surface), runs the tool calls the model asks for in order, and returns
// each result envelope to the model as the tool's answer, errors included:
// the model reads the error code and its retry hint and recovers.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
)

// DefaultSystem is the default system prompt.
const DefaultSystem = `You operate a devices console on behalf of its user, only through the tools given.
Tool results are JSON envelopes {status, output | error {code, message, retry, details}}.
The tools follow the screen: they change as panels open and close, so the list is refreshed every turn.
On STALE_CAPABILITY or COMPONENT_UNMOUNTED, the screen changed: use the current tools.
Destructive operations wait for the user's approval in the page; tell the user what you are asking for.
Be brief.`

// Loop is an agent.Runner backed by a chat-completions model.
type Loop struct {
	// Model names the model, e.g. "gpt-4o-mini" or "llama3.1".
	Model string
	// System is the system prompt. Default DefaultSystem.
	System string
	// MaxTurns bounds the model round trips of one run. Default 16.
	MaxTurns int
	// RequestTimeout bounds each model request, from sending it to the
	// end of the answer, so that an endpoint that hangs ends the run with
	// an error instead of holding it. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// HTTPClient sends the requests. Default http.DefaultClient.
	HTTPClient *http.Client
	// Header holds extra request headers (OpenAI-Organization, …).
	Header http.Header

	baseURL, apiKey string
}

// DefaultRequestTimeout is the default Loop.RequestTimeout.
const DefaultRequestTimeout = 60 * time.Second

// New returns a loop talking to the chat-completions API at baseURL (an
// OpenAI-compatible endpoint such as "http://localhost:11434/v1/" or
// "https://api.openai.com/v1"; requests go to baseURL's chat/completions),
// with apiKey sent as a bearer token ("" sends none, for servers that
// need none). A request the server answers with 408, 409, 429 or 5xx, or
// whose connection fails before an answer, is sent once more.
func New(baseURL, model, apiKey string) *Loop {
	return &Loop{Model: model, baseURL: baseURL, apiKey: apiKey}
}

// Run implements agent.Runner: it works on prompt until the model answers
// without tool calls, MaxTurns is reached, or ctx ends.
func (l *Loop) Run(ctx context.Context, prompt string, tools agent.Tools, report func(agent.Step)) error {
	if report == nil {
		report = func(agent.Step) {}
	}
	system := l.System
	if system == "" {
		system = DefaultSystem
	}
	turns := l.MaxTurns
	if turns <= 0 {
		turns = 16
	}
	n := 0
	emit := func(s agent.Step) {
		n++
		s.N = n
		report(s)
	}
	msgs := []message{textMessage("system", system), textMessage("user", prompt)}
	for range turns {
		list, err := tools.List(ctx)
		if err != nil {
			return fmt.Errorf("chat: list tools: %w", err)
		}
		start := time.Now()
		cc, err := l.complete(ctx, completionRequest{Model: l.Model, Messages: msgs, Tools: toolParams(list)})
		if err != nil {
			return fmt.Errorf("chat: model request: %w", err)
		}
		if len(cc.Choices) == 0 {
			return errors.New("chat: the model returned no choice")
		}
		m := cc.Choices[0].Message
		m.Role = "assistant" // the answer goes back into the conversation as is
		msgs = append(msgs, m)
		if text := m.text(); text != "" {
			emit(agent.Step{Title: text, Duration: time.Since(start)}) // said, not a call
		}
		if len(m.ToolCalls) == 0 {
			return nil
		}
		for _, tc := range m.ToolCalls {
			name, args := tc.Function.Name, json.RawMessage(tc.Function.Arguments)
			if !json.Valid(args) {
				args = json.RawMessage(`{}`)
			}
			start := time.Now()
			res, err := tools.Call(ctx, name, args)
			step := agent.Step{Tool: name, Args: args, Duration: time.Since(start)} // the tool says what it is
			var answer []byte
			if err != nil {
				step.Outcome, step.Detail = "error", err.Error()
				answer, _ = json.Marshal(map[string]string{"status": "error", "error": err.Error()})
			} else {
				step.Outcome = agent.Outcome(res)
				if res.Error != nil {
					step.Detail = res.Error.Message
				}
				answer, _ = json.Marshal(res)
			}
			emit(step)
			msgs = append(msgs, message{Role: "tool", Content: new(string(answer)), ToolCallID: tc.ID})
		}
	}
	return fmt.Errorf("chat: no answer after %d turns", turns)
}

// toolParams projects the catalog for the chat-completions API. The live
// state goes into the description: an unavailable tool says why.
func toolParams(list []agent.Tool) []toolParam {
	out := make([]toolParam, 0, len(list))
	for _, t := range list {
		params := t.InputSchema
		var obj map[string]any
		if json.Unmarshal(params, &obj) != nil || obj == nil {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		desc := t.Description
		if !t.Available {
			desc += " (Currently unavailable: " + t.UnavailableReason + ")"
		}
		out = append(out, toolParam{Type: "function", Function: functionParam{Name: t.Name, Description: desc, Parameters: params}})
	}
	return out
}
