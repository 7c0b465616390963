// Package conformance serves the fixtures of the official MCP conformance
// suite (npm @modelcontextprotocol/conformance) through mcpsurface: its
// named test tools are capabilities of a registry, run by the registry's
// pipeline and served by an mcpsurface HTTPHandler; its prompts,
// resources and completions are added through Options.Extend. The suite
// then tests the adapter, not a hand-written server.
//
// The fixtures follow go-sdk's conformance/everything-server, with these
// differences of substance: the sampling and elicitation tools ask the
// client through multi-round input (mcpsurface.InputRequired), which the
// SDK turns into sampling/createMessage and elicitation/create requests on
// an older client's session, so they work on both protocol generations;
// request state is signed by mcpsurface rather than checked for a
// "-TAMPERED" suffix; and the tools whose input schemas are outside the
// registry's JSON Schema subset (json_schema_2020_12_tool with allOf and
// if/then/else, test_x_mcp_header with the x-mcp-header keyword) do not
// exist, since the registry refuses to register a schema it cannot
// enforce.
package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a Server. The zero value is valid.
type Options struct {
	// Stateless serves every request session-less
	// (mcpsurface.HTTPOptions.Stateless).
	Stateless bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Server is the conformance server: one registry, one consumer, served
// over Streamable HTTP. It is an http.Handler.
type Server struct {
	reg *surface.Registry
	h   *mcpsurface.HTTPHandler

	mu      sync.Mutex
	servers map[*mcp.Server]bool // the MCP servers Extend set up, for the prompt-change tool
	flip    int
}

// Consumer is who the suite's requests act as.
var Consumer = surface.Consumer{ID: "conformance", Kind: surface.ConsumerMCPBridge}

// New returns a conformance server. Close it when done.
func New(opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Server{servers: map[*mcp.Server]bool{}}
	s.reg = surface.New(&surface.Options{OnDuplicate: surface.DuplicateReplace, Logger: o.Logger})
	for _, c := range s.components() {
		if _, err := s.reg.Register(c); err != nil {
			_ = s.reg.Close()
			return nil, fmt.Errorf("conformance: %s: %w", c.Type, err)
		}
	}
	s.h = mcpsurface.NewHTTPHandler(func(*http.Request) (*surface.Registry, surface.Consumer, error) {
		return s.reg, Consumer, nil
	}, &mcpsurface.HTTPOptions{
		Stateless: o.Stateless,
		Options: mcpsurface.Options{
			Implementation: &mcp.Implementation{Name: "agentsurface-conformance", Version: "1.0.0"},
			Logger:         o.Logger,
			ToolNames:      toolNames,
			Content:        content,
			Extend:         s.extend,
		},
	})
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

// Close ends the sessions and closes the registry.
func (s *Server) Close() error {
	return errors.Join(s.h.Close(), s.reg.Close())
}

// toolNames are the suite's tool names, by capability id.
var toolNames = map[string]string{
	"view:conformance.simple-text.run":        "test_simple_text",
	"view:conformance.image-content.run":      "test_image_content",
	"view:conformance.audio-content.run":      "test_audio_content",
	"view:conformance.embedded-resource.run":  "test_embedded_resource",
	"view:conformance.multiple-content.run":   "test_multiple_content_types",
	"view:conformance.logging.run":            "test_tool_with_logging",
	"view:conformance.progress.run":           "test_tool_with_progress",
	"view:conformance.error-handling.run":     "test_error_handling",
	"view:conformance.sampling.run":           "test_sampling",
	"view:conformance.elicitation.run":        "test_elicitation",
	"view:conformance.elicit-defaults.run":    "test_elicitation_sep1034_defaults",
	"view:conformance.elicit-enums.run":       "test_elicitation_sep1330_enums",
	"view:conformance.reconnection.run":       "test_reconnection",
	"view:conformance.missing-capability.run": "test_missing_capability",
	"view:conformance.streaming.run":          "test_streaming_elicitation",
	"view:conformance.logging-tool.run":       "test_logging_tool",
	"view:conformance.tool-change.run":        "test_trigger_tool_change",
	"view:conformance.prompt-change.run":      "test_trigger_prompt_change",
	"view:conformance.input-elicit.run":       "test_input_required_result_elicitation",
	"view:conformance.input-sampling.run":     "test_input_required_result_sampling",
	"view:conformance.input-roots.run":        "test_input_required_result_list_roots",
	"view:conformance.input-state.run":        "test_input_required_result_request_state",
	"view:conformance.input-multiple.run":     "test_input_required_result_multiple_inputs",
	"view:conformance.input-multi-round.run":  "test_input_required_result_multi_round",
	"view:conformance.input-tampered.run":     "test_input_required_result_tampered_state",
	"view:conformance.input-capabilities.run": "test_input_required_result_capabilities",
	"view:conformance.transient.run":          "__transient_tool_for_list_changed",
}

// Block is one content block of a tool's output; mcpsurface shows it as
// the MCP content block of its type (Options.Content).
type Block struct {
	Type     string `json:"type"` // text, image, audio or resource
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"` // base64
	MIMEType string `json:"mimeType,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// content turns a tool's []Block output into MCP content blocks.
func content(_ surface.Tool, output surface.JSONText) []mcp.Content {
	var blocks []Block
	if json.Unmarshal([]byte(output), &blocks) != nil {
		return nil
	}
	var out []mcp.Content
	for _, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, &mcp.TextContent{Text: b.Text})
		case "image", "audio":
			data, err := base64.StdEncoding.DecodeString(b.Data)
			if err != nil {
				continue
			}
			if b.Type == "image" {
				out = append(out, &mcp.ImageContent{Data: data, MIMEType: b.MIMEType})
			} else {
				out = append(out, &mcp.AudioContent{Data: data, MIMEType: b.MIMEType})
			}
		case "resource":
			out = append(out, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: b.URI, MIMEType: b.MIMEType, Text: b.Text}})
		}
	}
	return out
}

// Base64 test files, as the TypeScript and Go everything-servers have
// them: a 1×1 red PNG and a silent WAV.
const (
	testImage = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	testAudio = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

func text(s string) []Block { return []Block{{Type: "text", Text: s}} }

// observation is a component "conformance.<name>" with one observation,
// run, whose output is content blocks.
func observation(name, description string, read func(ctx context.Context) ([]Block, error)) surface.Component {
	return surface.Component{
		Type: "conformance." + name, Description: description,
		Observations: map[string]surface.Capability{"run": surface.Observation(surface.ObservationDef[[]Block]{
			Description: description,
			Read:        func(ctx context.Context, _ *surface.Call) ([]Block, error) { return read(ctx) },
		})},
	}
}

// action is a component "conformance.<name>" with one action, run.
func action[In any](name, description string, run func(ctx context.Context, in In) ([]Block, error)) surface.Component {
	return surface.Component{
		Type: "conformance." + name, Description: description,
		Actions: map[string]surface.Capability{"run": surface.Action(surface.ActionDef[In, []Block]{
			Description: description, Effect: surface.EffectLocalState,
			Execute: func(ctx context.Context, _ *surface.Call, in In) ([]Block, error) { return run(ctx, in) },
		})},
	}
}

// request is the tools/call a handler runs for; every fixture runs over
// MCP.
func request(ctx context.Context) (*mcp.CallToolRequest, error) {
	if req := mcpsurface.RequestFromContext(ctx); req != nil {
		return req, nil
	}
	return nil, errors.New("conformance: not an MCP call")
}

type samplingIn struct {
	Prompt string `json:"prompt" jsonschema:"The prompt to send to the LLM"`
}

type elicitationIn struct {
	Message string `json:"message" jsonschema:"The message to show the user"`
}

// components are the capabilities behind the suite's tools.
func (s *Server) components() []surface.Component {
	return []surface.Component{
		observation("simple-text", "Tests simple text content response", func(context.Context) ([]Block, error) {
			return text("This is a simple text response for testing."), nil
		}),
		observation("image-content", "Tests image content response", func(context.Context) ([]Block, error) {
			return []Block{{Type: "image", Data: testImage, MIMEType: "image/png"}}, nil
		}),
		observation("audio-content", "Tests audio content response", func(context.Context) ([]Block, error) {
			return []Block{{Type: "audio", Data: testAudio, MIMEType: "audio/wav"}}, nil
		}),
		observation("embedded-resource", "Tests embedded resource content response", func(context.Context) ([]Block, error) {
			return []Block{{Type: "resource", URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource"}}, nil
		}),
		observation("multiple-content", "Tests response with multiple content types (text, image, resource)", func(context.Context) ([]Block, error) {
			return []Block{
				{Type: "text", Text: "This is text content"},
				{Type: "image", Data: testImage, MIMEType: "image/png"},
				{Type: "resource", URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "This is an embedded resource"},
			}, nil
		}),
		observation("logging", "Tests tool that emits log messages during execution", func(ctx context.Context) ([]Block, error) {
			req, err := request(ctx)
			if err != nil {
				return nil, err
			}
			for _, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: msg})
			}
			return text("Tool with logging executed successfully"), nil
		}),
		observation("progress", "Tests tool that reports progress notifications", func(ctx context.Context) ([]Block, error) {
			req, err := request(ctx)
			if err != nil {
				return nil, err
			}
			token := req.Params.GetProgressToken()
			for _, p := range []float64{0, 50, 100} {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 100,
					Message: fmt.Sprintf("Completed step %.0f of 100", p)})
			}
			return text(fmt.Sprint(token)), nil
		}),
		observation("error-handling", "Tests error response handling", func(context.Context) ([]Block, error) {
			return nil, &surface.Error{Code: surface.CodeExecutionFailed, Message: "This tool intentionally returns an error for testing."}
		}),
		action("sampling", "Tests server-initiated sampling (LLM completion request)", func(ctx context.Context, in samplingIn) ([]Block, error) {
			responses, _ := mcpsurface.Input(ctx)
			if r, ok := responses["sample"].(*mcp.CreateMessageWithToolsResult); ok {
				return text("LLM response: " + firstText(r)), nil
			}
			if r, ok := responses["sample"].(*mcp.CreateMessageResult); ok {
				if t, ok := r.Content.(*mcp.TextContent); ok {
					return text("LLM response: " + t.Text), nil
				}
			}
			return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"sample": &mcp.CreateMessageParams{
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}}, MaxTokens: 100,
			}}, "")
		}),
		action("elicitation", "Tests server-initiated elicitation (user input request)", func(ctx context.Context, in elicitationIn) ([]Block, error) {
			return elicit(ctx, in.Message, json.RawMessage(`{"type":"object","properties":{"username":{"type":"string","description":"User's response"},`+
				`"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`), "User response")
		}),
		observation("elicit-defaults", "Tests elicitation with default values per SEP-1034", func(ctx context.Context) ([]Block, error) {
			return elicit(ctx, "Test defaults for primitives", json.RawMessage(`{"type":"object","properties":{`+
				`"name":{"type":"string","description":"User name","default":"John Doe"},`+
				`"age":{"type":"integer","description":"User age","default":30},`+
				`"score":{"type":"number","description":"User score","default":95.5},`+
				`"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},`+
				`"verified":{"type":"boolean","description":"Verification status","default":true}}}`), "Elicitation completed")
		}),
		observation("elicit-enums", "Tests elicitation with enum schema improvements per SEP-1330", func(ctx context.Context) ([]Block, error) {
			return elicit(ctx, "Test enum schemas", json.RawMessage(`{"type":"object","properties":{`+
				`"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},`+
				`"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},`+
				`"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},`+
				`"untitledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},`+
				`"titledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]}}}}`),
				"Elicitation completed")
		}),
		observation("reconnection", "Tests SSE stream disconnection and client reconnection (SEP-1699)", func(ctx context.Context) ([]Block, error) {
			req, err := request(ctx)
			if err != nil {
				return nil, err
			}
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
			}
			return text("Reconnection test completed successfully."), nil
		}),
		observation("missing-capability", "Requires the sampling client capability (SEP-2575)", func(ctx context.Context) ([]Block, error) {
			req, err := request(ctx)
			if err != nil {
				return nil, err
			}
			if caps := req.ClientCapabilities(); caps == nil || caps.Sampling == nil {
				return nil, mcpsurface.MissingClientCapability(ctx, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
			}
			return text("Client declared the sampling capability; tool executed."), nil
		}),
		observation("streaming", "Answers with result frames only, no top-level requests (SEP-2575)", func(context.Context) ([]Block, error) {
			return text("stream observed: result frames only, no top-level requests"), nil
		}),
		observation("logging-tool", "Attempts to emit a log message, which the SDK drops unless the client set a level (SEP-2575)", func(ctx context.Context) ([]Block, error) {
			if req, err := request(ctx); err == nil {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "test_logging_tool executed"})
			}
			return text("Log attempted; framework gates on _meta.../logLevel."), nil
		}),
		action("tool-change", "Mounts a component, which changes the tool list (SEP-2575)", func(context.Context, surface.None) ([]Block, error) {
			if _, err := s.reg.Register(transient()); err != nil {
				return nil, err
			}
			return text("tools_list_changed published"), nil
		}),
		action("prompt-change", "Changes the prompt list (SEP-2575)", func(context.Context, surface.None) ([]Block, error) {
			s.changePrompts()
			return text("prompts_list_changed published"), nil
		}),
		observation("input-elicit", "MRTR (SEP-2322): asks for the caller name via an in-band elicitation request", func(ctx context.Context) ([]Block, error) {
			responses, _ := mcpsurface.Input(ctx)
			if name, _ := accepted(responses, "user_name")["name"].(string); name != "" {
				return text("Hello, " + name + "!"), nil
			}
			return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"user_name": nameForm("What is your name?")}, "")
		}),
		observation("input-sampling", "MRTR (SEP-2322): asks for an LLM completion via an in-band sampling request", func(ctx context.Context) ([]Block, error) {
			responses, _ := mcpsurface.Input(ctx)
			if r, ok := responses["capital_question"].(*mcp.CreateMessageWithToolsResult); ok {
				return text("Sampling response: " + firstText(r)), nil
			}
			return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"capital_question": &mcp.CreateMessageParams{
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "What is the capital of France?"}}}, MaxTokens: 100,
			}}, "")
		}),
		observation("input-roots", "MRTR (SEP-2322): asks for the client roots via an in-band roots/list request", func(ctx context.Context) ([]Block, error) {
			responses, _ := mcpsurface.Input(ctx)
			if r, ok := responses["client_roots"].(*mcp.ListRootsResult); ok && r != nil {
				var uris []string
				for _, root := range r.Roots {
					uris = append(uris, root.URI)
				}
				return text(fmt.Sprintf("Client exposed %d root(s): %s", len(r.Roots), strings.Join(uris, ", "))), nil
			}
			return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}, "")
		}),
		observation("input-state", "MRTR (SEP-2322): round-trips integrity-protected requestState alongside an elicitation request", func(ctx context.Context) ([]Block, error) {
			responses, state := mcpsurface.Input(ctx)
			if accepted(responses, "confirm") != nil && state == "request_state" {
				return text("state-ok: requestState received and confirmation accepted"), nil
			}
			return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"confirm": confirmForm()}, "request_state")
		}),
		observation("input-multiple", "MRTR (SEP-2322): asks for elicitation, sampling and roots input in a single round", func(ctx context.Context) ([]Block, error) {
			responses, _ := mcpsurface.Input(ctx)
			name, _ := accepted(responses, "user_name")["name"].(string)
			greeting, hasGreeting := responses["greeting"].(*mcp.CreateMessageWithToolsResult)
			roots, hasRoots := responses["client_roots"].(*mcp.ListRootsResult)
			if name != "" && hasGreeting && hasRoots && roots != nil {
				return text(fmt.Sprintf("%s %s — %d root(s) visible", firstText(greeting), name, len(roots.Roots))), nil
			}
			return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{
				"user_name": nameForm("What is your name?"),
				"greeting": &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{{Role: "user",
					Content: &mcp.TextContent{Text: "Generate a greeting"}}}, MaxTokens: 50},
				"client_roots": &mcp.ListRootsParams{},
			}, "multiple_inputs")
		}),
		observation("input-multi-round", "MRTR (SEP-2322): two elicitation rounds with evolving requestState before completing", func(ctx context.Context) ([]Block, error) {
			responses, state := mcpsurface.Input(ctx)
			switch {
			case state == "":
				return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"step1": nameForm("Step 1: What is your name?")}, "round=1")
			case state == "round=1":
				name, _ := accepted(responses, "step1")["name"].(string)
				return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"step2": &mcp.ElicitParams{Message: "Step 2: What is your favorite color?",
					RequestedSchema: json.RawMessage(`{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}`)}},
					"round=2;name="+firstNonEmpty(name, "unknown"))
			default:
				color, _ := accepted(responses, "step2")["color"].(string)
				return text(fmt.Sprintf("Multi-round complete: %s likes %s", strings.TrimPrefix(state, "round=2;name="), firstNonEmpty(color, "unknown"))), nil
			}
		}),
		observation("input-tampered", "MRTR (SEP-2322): rejects retries whose requestState fails integrity verification", func(ctx context.Context) ([]Block, error) {
			responses, state := mcpsurface.Input(ctx)
			if state != "" && accepted(responses, "confirm") != nil {
				return text("state-ok: requestState received and confirmation accepted"), nil
			}
			return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"confirm": confirmForm()}, "tamper_check")
		}),
		observation("input-capabilities", "MRTR (SEP-2322): only requests input kinds the declared client capabilities cover", func(ctx context.Context) ([]Block, error) {
			if responses, _ := mcpsurface.Input(ctx); len(responses) > 0 {
				return text("Capability-aware input requests fulfilled"), nil
			}
			req, err := request(ctx)
			if err != nil {
				return nil, err
			}
			caps := req.ClientCapabilities()
			reqs := mcp.InputRequestMap{}
			if caps != nil && caps.Elicitation != nil {
				reqs["user_name"] = nameForm("What is your name?")
			}
			if caps != nil && caps.Sampling != nil {
				reqs["greeting"] = &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{{Role: "user",
					Content: &mcp.TextContent{Text: "Generate a short greeting"}}}, MaxTokens: 50}
			}
			if caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged) {
				reqs["client_roots"] = &mcp.ListRootsParams{}
			}
			if len(reqs) == 0 {
				return text("No declared client capability supports an in-band input request"), nil
			}
			return nil, mcpsurface.InputRequired(ctx, reqs, "")
		}),
	}
}

// transient is the component test_trigger_tool_change mounts (again).
func transient() surface.Component {
	return observation("transient", "Transient tool used to trigger tools/list_changed", func(context.Context) ([]Block, error) {
		return text("transient"), nil
	})
}

// elicit asks the client for a form with schema through multi-round
// input, and reports its answer.
func elicit(ctx context.Context, message string, schema json.RawMessage, prefix string) ([]Block, error) {
	responses, _ := mcpsurface.Input(ctx)
	if r, ok := responses["form"].(*mcp.ElicitResult); ok && r != nil {
		return text(fmt.Sprintf("%s: action=%s, content=%v", prefix, r.Action, r.Content)), nil
	}
	return nil, mcpsurface.InputRequired(ctx, mcp.InputRequestMap{"form": &mcp.ElicitParams{Message: message, RequestedSchema: schema}}, "")
}

func nameForm(message string) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message,
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}
}

func confirmForm() *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: "Please confirm",
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)}
}

// accepted returns the content of an accepted elicitation response.
func accepted(responses mcp.InputResponseMap, key string) map[string]any {
	r, ok := responses[key].(*mcp.ElicitResult)
	if !ok || r == nil || r.Action != "accept" {
		return nil
	}
	return r.Content
}

// firstText returns the first text of a sampling response.
func firstText(r *mcp.CreateMessageWithToolsResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "(non-text response)"
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
