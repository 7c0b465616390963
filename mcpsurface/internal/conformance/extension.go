package conformance

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// extend adds the suite's prompts, resources and resource template to
// each MCP server mcpsurface creates, with completion and subscription
// handlers and the logging capability.
func (s *Server) extend(*surface.Registry, surface.Consumer) *mcpsurface.Extension {
	return &mcpsurface.Extension{
		Setup: func(srv *mcp.Server) {
			s.mu.Lock()
			s.servers[srv] = true
			s.mu.Unlock()
			addPrompts(srv)
			addResources(srv)
		},
		Complete: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
		},
		Subscribe:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		Unsubscribe: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		Logging:     true,
	}
}

// changePrompts adds, or removes, a transient prompt on every server, so
// that their clients hear notifications/prompts/list_changed.
func (s *Server) changePrompts() {
	s.mu.Lock()
	s.flip++
	add := s.flip%2 == 1
	servers := make([]*mcp.Server, 0, len(s.servers))
	for srv := range s.servers {
		servers = append(servers, srv)
	}
	s.mu.Unlock()
	for _, srv := range servers {
		if add {
			srv.AddPrompt(&mcp.Prompt{Name: "__transient_prompt_for_list_changed", Description: "Transient prompt used to trigger prompts/list_changed"},
				func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{}, nil
				})
		} else {
			srv.RemovePrompts("__transient_prompt_for_list_changed")
		}
	}
}

func userText(text string) *mcp.PromptMessage {
	return &mcp.PromptMessage{Role: "user", Content: &mcp.TextContent{Text: text}}
}

func addPrompts(srv *mcp.Server) {
	srv.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "A simple test prompt", Messages: []*mcp.PromptMessage{userText("This is a simple prompt for testing.")}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with required arguments",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "A prompt with arguments", Messages: []*mcp.PromptMessage{
				userText(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", req.Params.Arguments["arg1"], req.Params.Arguments["arg2"]))}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "A prompt that includes an embedded resource",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "A prompt with an embedded resource", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain",
					Text: "Embedded resource content for testing."}}},
				userText("Please process the embedded resource above."),
			}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt that includes image content"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			img, _ := base64.StdEncoding.DecodeString(testImage)
			return &mcp.GetPromptResult{Description: "A prompt with an image", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.ImageContent{Data: img, MIMEType: "image/png"}},
				userText("Please analyze the image above."),
			}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "MRTR (SEP-2322): asks for context via an in-band elicitation request"},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if c := accepted(req.Params.InputResponses, "user_context"); c != nil {
				ctxText, _ := c["context"].(string)
				return &mcp.GetPromptResult{Description: "A prompt with elicited context", Messages: []*mcp.PromptMessage{userText("Context: " + ctxText)}}, nil
			}
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": &mcp.ElicitParams{
				Message:         "Please provide context for the prompt",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"context": map[string]any{"type": "string"}}, "required": []string{"context"}},
			}}}, nil
		})
}

// templateID reads the id of the template resource.
var templateID = regexp.MustCompile(`^test://template/([^/]+)/data$`)

func addResources(srv *mcp.Server) {
	textResource := func(body string) mcp.ResourceHandler {
		return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: body}}}, nil
		}
	}
	srv.AddResource(&mcp.Resource{Name: "static-text", Description: "A static text resource for testing", MIMEType: "text/plain", URI: "test://static-text"},
		textResource("This is the content of the static text resource."))
	srv.AddResource(&mcp.Resource{Name: "static-binary", Description: "A static binary resource (image) for testing", MIMEType: "image/png", URI: "test://static-binary"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			img, _ := base64.StdEncoding.DecodeString(testImage)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "image/png", Blob: img}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "template", Description: "A resource template with parameter substitution",
		MIMEType: "application/json", URITemplate: "test://template/{id}/data"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			m := templateID.FindStringSubmatch(req.Params.URI)
			if m == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such resource"}
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json",
				Text: fmt.Sprintf(`{"id": %q, "templateTest": true, "data": "Data for ID: %s"}`, m[1], m[1])}}}, nil
		})
	srv.AddResource(&mcp.Resource{Name: "watched-resource", Description: "A resource clients may subscribe to", MIMEType: "text/plain", URI: "test://watched-resource"},
		textResource("Watched resource content"))
}
