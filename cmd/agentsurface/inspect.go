package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"text/tabwriter"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
)

func inspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	token := fs.String("token", os.Getenv("AGENTSURFACE_TOKEN"), "bearer token of the endpoint (default $AGENTSURFACE_TOKEN)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentsurface inspect <mcp-url> [--token T]\n\nLists the tools of an agentsurface MCP endpoint: wire name, capability id,\neffect, confirmation and availability.\n\nFlags:\n")
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
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	m, err := agent.Dial(ctx, pos[0], &agent.DialOptions{Token: *token, Name: "agentsurface-inspect"})
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	defer m.Close()
	tools, err := m.List(ctx)
	if err != nil {
		return fail(stderr, "inspect", err)
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
	return exitOK
}

func call(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	token := fs.String("token", os.Getenv("AGENTSURFACE_TOKEN"), "bearer token of the endpoint (default $AGENTSURFACE_TOKEN)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentsurface call <mcp-url> <tool> ['<json arguments>'] [--token T]\n\nCalls one tool and prints the result envelope. The exit status is 0 when\nthe envelope's status is ok, 1 otherwise.\n\nFlags:\n")
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
	input := json.RawMessage(`{}`)
	if len(pos) == 3 {
		input = json.RawMessage(pos[2])
		if !json.Valid(input) {
			fmt.Fprintln(stderr, "agentsurface call: the arguments are not valid JSON")
			return exitUsage
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	m, err := agent.Dial(ctx, pos[0], &agent.DialOptions{Token: *token, Name: "agentsurface-call"})
	if err != nil {
		return fail(stderr, "call", err)
	}
	defer m.Close()
	res, err := m.Call(ctx, pos[1], input)
	if err != nil {
		return fail(stderr, "call", err)
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
		return exitFail
	}
	return exitOK
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
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	fmt.Fprintf(stdout, "agentsurface %s%s %s %s/%s\n", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
