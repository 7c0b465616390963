package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	modversion "github.com/agentsurface/agentsurface/internal/version"
	"github.com/agentsurface/agentsurface/surface"
)

// tokenHelp is what a command says when the endpoint refused its token.
const tokenHelp = "pass the session's token with --token (the page and the demo print it), or set $AGENTSURFACE_TOKEN"

// dial connects to an MCP endpoint; a refused token is said plainly.
func dial(ctx context.Context, url, token, name string) (*agent.MCP, error) {
	m, err := agent.Dial(ctx, url, &agent.DialOptions{Token: token, Name: name})
	if errors.Is(err, agent.ErrUnauthorized) {
		if token == "" {
			return nil, fmt.Errorf("%s refused the call without a token: %s", url, tokenHelp)
		}
		return nil, fmt.Errorf("%s refused the token (wrong, or its session has ended): %s", url, tokenHelp)
	}
	return m, err
}

// toolInfo is a tool as inspect --json prints it.
type toolInfo struct {
	agent.Tool
	RequiresConfirmation bool `json:"requiresConfirmation"`
}

func inspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	token := fs.String("token", os.Getenv("AGENTSURFACE_TOKEN"), "bearer token of the endpoint (default $AGENTSURFACE_TOKEN)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	asJSON := fs.Bool("json", false, "print the tools as a JSON array (name, description, inputSchema, capabilityId, effect, available, unavailableReason, requiresConfirmation)")
	describe := fs.Bool("describe", false, "after the table, print each tool's description and input schema")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentsurface inspect <mcp-url> [--token T] [--json | --describe]\n\nLists the tools of an agentsurface MCP endpoint: wire name, capability id,\neffect, confirmation and availability.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, code, done := parse(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "agentsurface inspect: want exactly one argument, the MCP endpoint URL")
		return exitUsage
	}
	if *asJSON && *describe {
		fmt.Fprintln(stderr, "agentsurface inspect: --json already holds the descriptions and schemas; use one of --json and --describe")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	m, err := dial(ctx, pos[0], *token, "agentsurface-inspect")
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	defer m.Close()
	tools, err := m.List(ctx)
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	if *asJSON {
		out := make([]toolInfo, len(tools))
		for i, t := range tools {
			out[i] = toolInfo{Tool: t, RequiresConfirmation: agent.RequiresConfirmation(t)}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
			return fail(stderr, "inspect", err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tCAPABILITY\tEFFECT\tCONFIRMATION\tAVAILABLE")
	for _, t := range tools {
		confirm := "-"
		if agent.RequiresConfirmation(t) {
			confirm = "required"
		}
		avail := "yes"
		if !t.Available {
			avail = "no: " + t.UnavailableReason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, orDash(t.CapabilityID), orDash(t.Effect), confirm, avail)
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "inspect", err)
	}
	if *describe {
		for _, t := range tools {
			var schema bytes.Buffer
			if json.Indent(&schema, t.InputSchema, "    ", "  ") != nil {
				schema.Reset()
				schema.Write(t.InputSchema)
			}
			fmt.Fprintf(stdout, "\n%s\n  %s\n  input: %s\n", t.Name, strings.ReplaceAll(t.Description, "\n", "\n  "), schema.Bytes())
		}
	}
	return exitOK
}

func call(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	token := fs.String("token", os.Getenv("AGENTSURFACE_TOKEN"), "bearer token of the endpoint (default $AGENTSURFACE_TOKEN)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long (with --wait: the longest wait for the approval)")
	cid := fs.String("confirmation-id", "", "present this approved confirmation: the retry of a call that answered CONFIRMATION_REQUIRED")
	wait := fs.Bool("wait", false, "when the call needs the user's approval, wait for the decision and print the final result")
	poll := fs.Duration("poll", time.Second, "with --wait: how often to ask whether the user has decided")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentsurface call <mcp-url> <tool> ['<json arguments>'] [--token T] [--wait | --confirmation-id ID]\n\nLists the endpoint's tools, calls one and prints the result envelope. The\nexit status is 0 when the envelope's status is ok, 1 otherwise. When the\nsurface changed since the listing (the result says retry after-refresh),\nthe tools are listed again and the call is made once more; a tool that is\nno longer offered is said plainly.\n\nA call that needs the user's approval answers CONFIRMATION_REQUIRED with a\nconfirmationId: approve it in the page, then call again with the same\narguments and --confirmation-id; or give --wait, which waits for the\ndecision and retries by itself.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, code, done := parse(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) < 2 || len(pos) > 3 {
		fmt.Fprintln(stderr, "agentsurface call: want <mcp-url> <tool> and optionally the JSON arguments")
		return exitUsage
	}
	if *poll <= 0 {
		fmt.Fprintln(stderr, "agentsurface call: --poll must be positive")
		return exitUsage
	}
	input := json.RawMessage(`{}`)
	if len(pos) == 3 {
		input = json.RawMessage(pos[2])
		if !json.Valid(input) {
			fmt.Fprintln(stderr, "agentsurface call: the arguments are not valid JSON")
			return exitUsage
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, *timeout, errTimedOut)
	defer cancel()
	c := &oneShot{url: pos[0], tool: pos[1], input: input, timeout: *timeout}
	m, err := dial(ctx, c.url, *token, "agentsurface-call")
	if err != nil {
		return fail(stderr, "call", c.stopped(ctx, err, "connecting"))
	}
	defer m.Close()
	// The endpoint resolves a call against the tools its client was last
	// shown, as with any MCP client: list them first.
	if _, err := c.find(ctx, m, false); err != nil {
		return fail(stderr, "call", c.stopped(ctx, err, "listing the tools"))
	}
	res, err := c.call(ctx, m, agent.CallOptions{ConfirmationID: *cid})
	if err != nil {
		return fail(stderr, "call", c.stopped(ctx, err, "calling "+c.tool))
	}
	if *wait && res.Error != nil && res.Error.Code == surface.CodeConfirmationRequired {
		id, summary := res.Error.ConfirmationID(), res.Error.Summary()
		fmt.Fprintf(stderr, "agentsurface call: waiting for the user's decision on %s: %s\n", id, summary)
		tick := time.NewTicker(*poll)
		defer tick.Stop()
		for res.Error != nil && res.Error.Code == surface.CodeConfirmationRequired {
			select {
			case <-ctx.Done():
				return fail(stderr, "call", c.stoppedWaiting(ctx, id))
			case <-tick.C:
			}
			// Asking again is a call: the registry answers
			// CONFIRMATION_REQUIRED under the same invocation id until the
			// user decides, which the console's Activity shows once.
			if res, err = c.call(ctx, m, agent.CallOptions{ConfirmationID: id}); err != nil {
				if ctx.Err() != nil {
					return fail(stderr, "call", c.stoppedWaiting(ctx, id))
				}
				return fail(stderr, "call", err)
			}
		}
	}
	b, _ := json.Marshal(res)
	var out bytes.Buffer
	_ = json.Indent(&out, b, "", "  ")
	out.WriteByte('\n')
	if _, err := stdout.Write(out.Bytes()); err != nil {
		return fail(stderr, "call", err)
	}
	if res.Error != nil {
		fmt.Fprintf(stderr, "agentsurface call: %s: %s\n", res.Error.Code, res.Error.Message)
		if id := res.Error.ConfirmationID(); res.Error.Code == surface.CodeConfirmationRequired && id != "" {
			fmt.Fprintf(stderr, "  approve it in the page, then run the same call with --confirmation-id %s (or add --wait)\n", id)
		}
		return exitFail
	}
	return exitOK
}

// errTimedOut is the cause of a call command's context ending at
// --timeout; any other cause is an interruption (SIGINT, SIGTERM).
var errTimedOut = errors.New("--timeout passed")

// oneShot is one tool call of the call command.
type oneShot struct {
	url, tool string
	input     json.RawMessage
	timeout   time.Duration
}

// goneError reports a tool the endpoint does not offer.
type goneError struct {
	url, tool string
	// after is set when the tool was offered, and the endpoint no longer
	// offers it once the surface changed.
	after bool
}

func (e *goneError) Error() string {
	if e.after {
		return fmt.Sprintf("the tool %s is gone: the surface changed and %s no longer offers it (the page that offered it closed or shows something else); run \"agentsurface inspect %s\" for the tools it offers now",
			e.tool, e.url, e.url)
	}
	return fmt.Sprintf("%s offers no tool %s now; run \"agentsurface inspect %s\" for the tools it offers", e.url, e.tool, e.url)
}

// find lists the endpoint's tools, which the endpoint then resolves the
// client's calls against, and returns the one called c.tool, or a
// *goneError (after: it was offered before).
func (c *oneShot) find(ctx context.Context, m *agent.MCP, after bool) (agent.Tool, error) {
	tools, err := m.List(ctx)
	if err != nil {
		return agent.Tool{}, err
	}
	for _, t := range tools {
		if t.Name == c.tool {
			return t, nil
		}
	}
	return agent.Tool{}, &goneError{url: c.url, tool: c.tool, after: after}
}

// call calls the tool. A result that says to retry after a refresh (the
// surface changed since the listing: STALE_CAPABILITY and the like) lists
// the tools again and, if the tool is still offered and available, calls
// it once more; a tool no longer offered is a *goneError.
func (c *oneShot) call(ctx context.Context, m *agent.MCP, o agent.CallOptions) (surface.Result, error) {
	res, err := m.CallWith(ctx, c.tool, c.input, o)
	if err != nil || res.Error == nil || res.Error.Retry != surface.RetryAfterRefresh {
		return res, err
	}
	t, err := c.find(ctx, m, true)
	if err != nil {
		return res, err
	}
	if !t.Available {
		return res, nil // refreshed, and still unavailable: the result says why
	}
	return m.CallWith(ctx, c.tool, c.input, o)
}

// stopped says why doing what failed with err when ctx ended: --timeout
// passed, or the command was interrupted.
func (c *oneShot) stopped(ctx context.Context, err error, doing string) error {
	if ctx.Err() == nil {
		return err
	}
	if errors.Is(context.Cause(ctx), errTimedOut) {
		return fmt.Errorf("gave up %s after --timeout (%s)", doing, c.timeout)
	}
	return fmt.Errorf("interrupted while %s (%v)", doing, context.Cause(ctx))
}

// stoppedWaiting says why the wait for the decision on confirmation id
// ended without one, and what the user can still do.
func (c *oneShot) stoppedWaiting(ctx context.Context, id string) error {
	then := fmt.Sprintf("the approval stays pending in the page until it expires; once approved, run the same call with --confirmation-id %s", id)
	if errors.Is(context.Cause(ctx), errTimedOut) {
		return fmt.Errorf("no decision on %s within --timeout (%s); %s", id, c.timeout, then)
	}
	return fmt.Errorf("interrupted while waiting for the decision on %s (%v); %s", id, context.Cause(ctx), then)
}

func version(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentsurface version\n\nPrints the module version, the commit it was built from, and the Go version.\n")
	}
	pos, code, done := parse(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintln(stderr, "agentsurface version: takes no arguments")
		return exitUsage
	}
	printVersion(stdout)
	return exitOK
}

// printVersion prints the module version (with the commit of a build from
// a checkout), the Go version and the platform: what MCP clients see as
// the demo's serverInfo.version is the first of them.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "agentsurface %s %s %s/%s\n", modversion.Module(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
