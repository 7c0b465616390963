package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The MCP client configurations the README gives (Claude Desktop, Cursor,
// VS Code) are JSON each client parses: valid, with the shape its
// documentation gives, naming the demo's endpoint and the bearer header.
func TestREADMEClientConfigs(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	var clients []string
	for _, m := range blocks {
		var cfg map[string]map[string]map[string]any
		if err := json.Unmarshal([]byte(m[1]), &cfg); err != nil {
			t.Errorf("not valid JSON (%v):\n%s", err, m[1])
			continue
		}
		for key, servers := range cfg {
			s, ok := servers["devices"]
			if !ok {
				t.Errorf("%s has no devices server: %s", key, m[1])
				continue
			}
			switch {
			case key == "mcpServers" && s["command"] == "npx": // Claude Desktop, through mcp-remote
				args, _ := s["args"].([]any)
				if len(args) != 4 || args[0] != "mcp-remote" || args[1] != "http://127.0.0.1:8080/mcp" || args[3] != "Authorization: Bearer …" {
					t.Errorf("Claude Desktop: %v", args)
				}
				clients = append(clients, "claude")
			case key == "mcpServers": // Cursor
				h, _ := s["headers"].(map[string]any)
				if s["url"] != "http://127.0.0.1:8080/mcp" || h["Authorization"] != "Bearer …" {
					t.Errorf("Cursor: %v", s)
				}
				clients = append(clients, "cursor")
			case key == "servers": // VS Code
				h, _ := s["headers"].(map[string]any)
				if s["type"] != "http" || s["url"] != "http://127.0.0.1:8080/mcp" || h["Authorization"] != "Bearer …" {
					t.Errorf("VS Code: %v", s)
				}
				clients = append(clients, "vscode")
			default:
				t.Errorf("an unknown configuration: %s", m[1])
			}
		}
	}
	if got := strings.Join(clients, ","); got != "claude,cursor,vscode" {
		t.Errorf("configurations for %q, want Claude Desktop, Cursor and VS Code", got)
	}
}
