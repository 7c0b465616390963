package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/console"
)

// inspectorEnv asks for TestInspectorPrintedCommand, which runs the MCP
// Inspector from npm: go test stays hermetic without it.
const inspectorEnv = "AGENTSURFACE_INSPECTOR"

// words splits a command line the way a POSIX shell splits the one the
// page prints: on spaces, double quotes grouping.
func words(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, started := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case r == ' ' && !quoted:
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		out = append(out, cur.String())
	}
	return out
}

// nodeAtLeast reports the version of the node on PATH and whether it is
// at least major.minor.
func nodeAtLeast(t *testing.T, major, minor int) (string, bool) {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("%s=1 but node is not on PATH: %v", inspectorEnv, err)
	}
	v := strings.TrimSpace(string(out))
	m := regexp.MustCompile(`^v(\d+)\.(\d+)`).FindStringSubmatch(v)
	if m == nil {
		return v, false
	}
	maj, _ := strconv.Atoi(m[1])
	mnr, _ := strconv.Atoi(m[2])
	return v, maj > major || maj == major && mnr >= minor
}

// The MCP Inspector command the page prints works as printed: the test
// takes it from the rendered page, runs it (npx, Node.js ≥ 22.19 first on
// PATH, as .ci/run sets up) and reads the session's tools from its
// output; the same command with --method tools/call calls one. It runs
// only with AGENTSURFACE_INSPECTOR=1: the first run downloads the
// Inspector.
func TestInspectorPrintedCommand(t *testing.T) {
	if os.Getenv(inspectorEnv) != "1" {
		t.Skip("the MCP Inspector is downloaded from npm only when asked: run with " + inspectorEnv + "=1 (needs Node.js ≥ 22.19 and npx on PATH; .ci/run does)")
	}
	if v, ok := nodeAtLeast(t, 22, 19); !ok {
		t.Fatalf("the page says the Inspector needs %s; node on PATH is %s", console.InspectorNode, v)
	}
	d := newDemo(t, console.Options{})
	b := d.browser(t)
	_, page := b.get("/")
	tab := b.events() // the page is open: its views are mounted
	m := regexp.MustCompile(`MCP Inspector <span class="muted">\(needs ([^)]*)\)</span></p><pre class="cmd">([^<]*)</pre>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("the page prints no Inspector command")
	}
	if html.UnescapeString(m[1]) != console.InspectorNode {
		t.Fatalf("the page says it needs %q", m[1])
	}
	argv := words(html.UnescapeString(m[2]))
	if argv[0] != "npx" || !slices.Contains(argv, console.InspectorPackage) {
		t.Fatalf("the command: %q", argv)
	}
	ctx, cancel := context.WithTimeout(bg, 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	run := func(argv []string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%q: %v\nstdout: %s\nstderr: %s", argv, err, stdout.Bytes(), stderr.Bytes())
		}
		return stdout.Bytes()
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	out := run(argv)
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("tools/list: %v\n%s", err, out)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "view_devices__table__readState") || !slices.Contains(names, "domain_devices__disable") {
		t.Fatalf("tools: %v", names)
	}

	callArgv := append(slices.Clone(argv[:len(argv)-1]), "tools/call", "--tool-name", "view_devices__table__setFilter", "--tool-arg", "status=offline")
	var call struct {
		StructuredContent struct {
			Status string `json:"status"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	}
	out = run(callArgv)
	if err := json.Unmarshal(out, &call); err != nil || call.IsError || call.StructuredContent.Status != "ok" {
		t.Fatalf("tools/call: %v\n%s", err, out)
	}
	tab.await(t, "table", func(h string) bool {
		return strings.Contains(h, "hvac-ctrl-lon-03") && !strings.Contains(h, "edge-gw-ams-01")
	})
}
