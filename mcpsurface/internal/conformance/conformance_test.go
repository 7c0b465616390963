package conformance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/mcpsurface/internal/conformance"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bg = context.Background()

// serve starts the conformance server on loopback and returns its URL.
func serve(t *testing.T, stateless bool) string {
	t.Helper()
	s, err := conformance.New(&conformance.Options{Stateless: stateless})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		_ = s.Close()
		hs.Close()
	})
	return hs.URL + "/mcp"
}

func connect(t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conformance-test", Version: "1"}, opts).
		Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// The suite's fixtures, served through mcpsurface at both protocol
// generations: the named tools are the registry's capabilities (their
// results carry the envelope as structured content), with the content
// blocks the suite expects; prompts and resources come from the
// extension; sampling and elicitation are asked of the client (through
// the SDK on an older session, natively on a 2026-07-28 one).
func TestFixtures(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			url := serve(t, false)
			var asked []string
			cs := connect(t, url, version, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = append(asked, req.Params.Message)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ann", "email": "ann@example.com"}}, nil
				},
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}}, nil
				},
			})
			var tools []string
			for tool, err := range cs.Tools(bg, nil) {
				if err != nil {
					t.Fatal(err)
				}
				tools = append(tools, tool.Name)
			}
			for _, want := range []string{"test_simple_text", "test_image_content", "test_multiple_content_types", "test_sampling",
				"test_elicitation", "test_input_required_result_multi_round", "test_trigger_tool_change"} {
				if !slices.Contains(tools, want) {
					t.Fatalf("no tool %s in %v", want, tools)
				}
			}
			call := func(name string, args any) *mcp.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if res.StructuredContent == nil {
					t.Fatalf("%s: no envelope", name)
				}
				return res
			}
			res := call("test_multiple_content_types", nil)
			var kinds []string
			for _, c := range res.Content {
				switch c.(type) {
				case *mcp.TextContent:
					kinds = append(kinds, "text")
				case *mcp.ImageContent:
					kinds = append(kinds, "image")
				case *mcp.EmbeddedResource:
					kinds = append(kinds, "resource")
				}
			}
			if strings.Join(kinds, ",") != "text,image,resource,text" { // the blocks, then the envelope
				t.Fatalf("content %v", kinds)
			}
			if res := call("test_error_handling", nil); !res.IsError {
				t.Fatal("test_error_handling did not fail")
			}
			res = call("test_sampling", map[string]any{"prompt": "Capital of France?"})
			if got := res.Content[0].(*mcp.TextContent).Text; got != "LLM response: Paris" {
				t.Fatalf("sampling: %q", got)
			}
			res = call("test_elicitation", map[string]any{"message": "Who are you?"})
			if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "action=accept") || len(asked) != 1 || asked[0] != "Who are you?" {
				t.Fatalf("elicitation: %q, asked %v", got, asked)
			}
			p, err := cs.GetPrompt(bg, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
			if err != nil || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, "arg1='a'") {
				t.Fatalf("prompt: %+v %v", p, err)
			}
			r, err := cs.ReadResource(bg, &mcp.ReadResourceParams{URI: "test://template/123/data"})
			if err != nil || !strings.Contains(r.Contents[0].Text, "123") {
				t.Fatalf("template: %+v %v", r, err)
			}
		})
	}
}
