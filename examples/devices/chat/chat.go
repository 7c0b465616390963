// Package chat is the devices console's model loop: an [agent.Runner]
// that lets a model behind any OpenAI-compatible chat-completions endpoint
// (OpenAI, a local Ollama or vLLM) operate the console's tools, with the
// official openai-go client.
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
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
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

	client openai.Client
}

// New returns a loop talking to the chat-completions API at baseURL (an
// OpenAI-compatible endpoint such as "http://localhost:11434/v1/"; the
// path must end with "/v1/"), with apiKey (any non-empty string for
// servers that ignore it). Extra options go to the client.
func New(baseURL, model, apiKey string, opts ...option.RequestOption) *Loop {
	if apiKey == "" {
		apiKey = "none"
	}
	all := append([]option.RequestOption{option.WithBaseURL(baseURL), option.WithAPIKey(apiKey), option.WithMaxRetries(1)}, opts...)
	return &Loop{Model: model, client: openai.NewClient(all...)}
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
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(prompt)}
	for range turns {
		list, err := tools.List(ctx)
		if err != nil {
			return fmt.Errorf("chat: list tools: %w", err)
		}
		start := time.Now()
		cc, err := l.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: l.Model, Messages: msgs, Tools: toolParams(list),
		})
		if err != nil {
			return fmt.Errorf("chat: model request: %w", err)
		}
		if len(cc.Choices) == 0 {
			return errors.New("chat: the model returned no choice")
		}
		m := cc.Choices[0].Message
		msgs = append(msgs, m.ToParam())
		if m.Content != "" {
			emit(agent.Step{Title: m.Content, Outcome: "said", Duration: time.Since(start)})
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
			step := agent.Step{Title: "call " + name, Tool: name, Args: args, Duration: time.Since(start)}
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
			msgs = append(msgs, openai.ToolMessage(string(answer), tc.ID))
		}
	}
	return fmt.Errorf("chat: no answer after %d turns", turns)
}

// toolParams projects the catalog for the chat-completions API. The live
// state goes into the description: an unavailable tool says why.
func toolParams(list []agent.Tool) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(list))
	for _, t := range list {
		var params shared.FunctionParameters
		if err := json.Unmarshal(t.InputSchema, &params); err != nil || params == nil {
			params = shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		}
		desc := t.Description
		if !t.Available {
			desc += " (Currently unavailable: " + t.UnavailableReason + ")"
		}
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(desc), Parameters: params, Strict: openai.Bool(false),
		}))
	}
	return out
}
