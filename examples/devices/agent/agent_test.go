package agent_test

import (
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Envelope reads a server's tool result, untrusted input, without
// panicking; what it accepts is an envelope with a status.
func FuzzEnvelope(f *testing.F) {
	f.Add(`{"status":"ok","invocationId":"i","capabilityId":"c","surfaceVersion":"1"}`)
	f.Add(`{"status":"error","error":{"code":"STALE_CAPABILITY","message":"m","retry":"after-refresh","details":{"reason":"x"}}}`)
	f.Add(`{}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, text string) {
		res, err := agent.Envelope(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}})
		if err == nil && res.Status == "" {
			t.Fatalf("accepted an envelope without a status: %q", text)
		}
	})
}

// Transcript marks unexpected outcomes with what was wanted, and shows
// a step's link whole.
func TestTranscript(t *testing.T) {
	var b strings.Builder
	report := agent.Transcript(&b)
	report(agent.Step{N: 1, Title: "discover", Tool: "tools/list", Outcome: "ok", Want: "ok"})
	report(agent.Step{N: 2, Title: "read", Tool: "view_x", Outcome: "STALE_CAPABILITY", Want: "ok", Detail: "changed\nsince"})
	link := "http://127.0.0.1:8080/agentsurface/approve/cnf_abc?link=s_1.u." + strings.Repeat("x", 120)
	report(agent.Step{N: 3, Title: "hand the user the approve link", Outcome: "link given", Want: "link given", Link: link})
	out := b.String()
	if !strings.Contains(out, "ok                       ✓") || !strings.Contains(out, "STALE_CAPABILITY         ✗") || !strings.Contains(out, "want ok: changed since") {
		t.Fatalf("%s", out)
	}
	if !strings.Contains(out, "\n     ↳ "+link+"\n") {
		t.Fatalf("the link is not shown whole on a line of its own:\n%s", out)
	}
	if strings.Count(out, "\n") != 5 {
		t.Fatalf("want a header, three lines and the link:\n%s", out)
	}
}

// RequiresConfirmation reads the toolset's description prefix only.
func TestRequiresConfirmation(t *testing.T) {
	for desc, want := range map[string]bool{
		"[domain · destructive · requires confirmation] Disable devices.": true,
		"[view · local-state] Select rows; requires confirmation later.":  false,
		"": false,
	} {
		if got := agent.RequiresConfirmation(agent.Tool{Description: desc}); got != want {
			t.Errorf("%q: %v", desc, got)
		}
	}
}
