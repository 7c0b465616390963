package mcpsurface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// inspectorPackage pins the Inspector this test drives: the same 2.x
// release the devices console prints and tests (console.InspectorPackage),
// so that the project drives one Inspector. 2.x is the first with
// --header; it needs Node.js >= 22.19.
const inspectorPackage = "@modelcontextprotocol/inspector@2.12.0"

// inspectorEnv asks for TestInspectorCLI, which downloads the Inspector
// from npm: go test stays hermetic without it.
const inspectorEnv = "AGENTSURFACE_INSPECTOR"

// The HTTP endpoint works with the reference client: the MCP Inspector
// CLI (TypeScript SDK) lists the tools (with their titles, and schemas its
// --strict portability lint finds nothing in) and calls one, with the
// session's token as a bearer token. It runs only when AGENTSURFACE_INSPECTOR=1
// (.ci/run sets it) and then needs npx, under Node.js >= 22.19 first on
// PATH (.ci/run puts one there); the first run downloads the Inspector,
// hence the generous bound.
func TestInspectorCLI(t *testing.T) {
	if os.Getenv(inspectorEnv) != "1" {
		t.Skip("the MCP Inspector (about 240 MB from npm) is not downloaded by default; run it with " +
			inspectorEnv + "=1 go test ./mcpsurface -run TestInspectorCLI (needs Node.js >= 22.19 and npx on PATH; .ci/run sets them up)")
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatalf("%s=1 but npx is not on PATH: %v", inspectorEnv, err)
	}
	if v, ok := nodeAtLeast(t, 22, 19); !ok {
		t.Fatalf("%s needs Node.js >= 22.19; node on PATH is %s", inspectorPackage, v)
	}
	users := twoUsers(t)
	f := newHTTP(t, nil, users)
	url := f.srv.URL + "/mcp"
	ctx, cancel := context.WithTimeout(bg, 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	// run runs the Inspector CLI with args and returns its stdout, its
	// stderr and how it exited; runAs does as the user of token.
	var runAs func(token string, args ...string) (stdout, stderr []byte, err error)
	run := func(args ...string) (stdout, stderr []byte, err error) {
		t.Helper()
		return runAs("tok-alice", args...)
	}
	runAs = func(token string, args ...string) (stdout, stderr []byte, err error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, npx, append([]string{"-y", inspectorPackage, "--cli", url, "--transport", "http", "--header", "Authorization: Bearer " + token}, args...)...)
		cmd.Dir = dir
		cmd.WaitDelay = 5 * time.Second
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		return out.Bytes(), errOut.Bytes(), err
	}
	inspect := func(args ...string) []byte {
		t.Helper()
		stdout, stderr, err := run(args...)
		if err != nil {
			t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, stdout, stderr)
		}
		return stdout
	}

	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			Title       string         `json:"title"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
			Annotations map[string]any `json:"annotations"`
			Meta        map[string]any `json:"_meta"`
		} `json:"tools"`
	}
	out := inspect("--method", "tools/list")
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("tools/list output is not JSON: %v\n%s", err, out)
	}
	byName := map[string]int{}
	for i, tool := range list.Tools {
		byName[tool.Name] = i
	}
	if len(list.Tools) != 5 {
		t.Fatalf("tools: %s", out)
	}
	read, ok := byName["view_devices__table__readState"]
	if !ok {
		t.Fatalf("no readState tool: %s", out)
	}
	if ann := list.Tools[read].Annotations; ann["readOnlyHint"] != true || ann["destructiveHint"] != false || ann["openWorldHint"] != false {
		t.Fatalf("annotations %v", ann)
	}
	if m := list.Tools[read].Meta; m["agentsurface/capabilityId"] != "view:devices.table.readState" {
		t.Fatalf("_meta %v", m)
	}
	if title := list.Tools[read].Title; title != "Devices table: read state" || list.Tools[read].Annotations["title"] != title {
		t.Fatalf("title %q, annotations %v", title, list.Tools[read].Annotations)
	}

	// The schemas are portable: the Inspector's --strict lint finds
	// nothing (no type arrays, no schema that constrains nothing) in the
	// tools of either user (views with nullable slices in their output,
	// domain procedures).
	for _, token := range []string{"tok-alice", "tok-bob"} {
		stdout, stderr, err := runAs(token, "--method", "tools/list", "--strict")
		if err != nil || bytes.Contains(stderr, []byte("Warning")) || bytes.Contains(stderr, []byte("Error")) ||
			bytes.Contains(stderr, []byte("portability")) {
			t.Fatalf("tools/list --strict as %s: %v\nstdout: %s\nstderr: %s", token, err, stdout, stderr)
		}
	}

	var call struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent envelope `json:"structuredContent"`
		IsError           bool     `json:"isError"`
	}
	out = inspect("--method", "tools/call", "--tool-name", "view_devices__table__label", "--tool-arg", "label=hello")
	if err := json.Unmarshal(out, &call); err != nil {
		t.Fatalf("tools/call output is not JSON: %v\n%s", err, out)
	}
	env := call.StructuredContent
	var output bytes.Buffer
	_ = json.Compact(&output, env.Output)
	if call.IsError || env.Status != "ok" || output.String() != `{"label":"hello"}` || len(call.Content) != 1 || call.Content[0].Type != "text" {
		t.Fatalf("tools/call: %s", out)
	}
	if users["tok-alice"].app.labels.Load() != 1 {
		t.Fatal("not executed")
	}

	// A typed error reaches the Inspector as an isError result, which
	// the 2.x CLI prints and then exits non-zero with tool_is_error.
	out, stderr, err := run("--method", "tools/call", "--tool-name", "view_devices__table__wipe", "--tool-arg", `ids=["d1"]`)
	if err == nil || !bytes.Contains(stderr, []byte("tool_is_error")) {
		t.Fatalf("tools/call wipe: exit %v, want the CLI's tool_is_error\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	call.IsError, call.StructuredContent = false, envelope{}
	if err := json.Unmarshal(out, &call); err != nil {
		t.Fatalf("tools/call output is not JSON: %v\n%s", err, out)
	}
	if !call.IsError || call.StructuredContent.Error == nil || call.StructuredContent.Error.Code != "CONFIRMATION_REQUIRED" {
		t.Fatalf("tools/call wipe: %s", out)
	}
}

// nodeAtLeast reports the version of the node on PATH and whether it is
// at least major.minor.
func nodeAtLeast(t *testing.T, major, minor int) (string, bool) {
	t.Helper()
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("%s=1 but node is not on PATH: %v", inspectorEnv, err)
	}
	v := strings.TrimSpace(string(out))
	var maj, mnr int
	if _, err := fmt.Sscanf(v, "v%d.%d", &maj, &mnr); err != nil {
		return v, false
	}
	return v, maj > major || maj == major && mnr >= minor
}
