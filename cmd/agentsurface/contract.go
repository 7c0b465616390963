package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/surface/contract"
)

// contractCmd prints the contract of what an MCP endpoint lists to the
// token's consumer.
func contractCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("contract", flag.ContinueOnError)
	token := fs.String("token", os.Getenv("AGENTSURFACE_TOKEN"), "bearer token of the endpoint (default $AGENTSURFACE_TOKEN)")
	consumer := fs.String("consumer", "mcp", "the consumer's name in the contract")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: agentsurface contract <mcp-url> [--token T] [--consumer NAME]

Prints the contract of an MCP endpoint: what it lists to the consumer the
token stands for, as an agentsurface contract file (source "mcp"). Over MCP
a contract knows the tools' wire names, capability ids, kinds, effects,
descriptions, schemas, annotations, idempotency and whether calls require
confirmation; it cannot know hidden capabilities, declared confirmation
levels, bound fields, meta records or policies (a registry contract,
surfacetest.RequireContract, has them). Compare two with agentsurface diff.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, code, done := parse(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "agentsurface contract: want exactly one argument, the MCP endpoint URL")
		return exitUsage
	}
	if *consumer == "" {
		fmt.Fprintln(stderr, "agentsurface contract: --consumer must not be empty")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	m, err := agent.Dial(ctx, pos[0], &agent.DialOptions{Token: *token, Name: "agentsurface-contract"})
	if err != nil {
		return fail(stderr, "contract", err)
	}
	defer m.Close()
	var tools []contract.Tool
	for t, err := range m.Session().Tools(ctx, nil) {
		if err != nil {
			return fail(stderr, "contract", err)
		}
		// contract.Tool has the JSON names of MCP's Tool.
		b, err := json.Marshal(t)
		if err != nil {
			return fail(stderr, "contract", err)
		}
		var ct contract.Tool
		if err := json.Unmarshal(b, &ct); err != nil {
			return fail(stderr, "contract", fmt.Errorf("tool %q: %w", t.Name, err))
		}
		tools = append(tools, ct)
	}
	c, err := contract.FromTools(*consumer, tools)
	if err != nil {
		return fail(stderr, "contract", err)
	}
	b, err := c.Encode()
	if err != nil {
		return fail(stderr, "contract", err)
	}
	if _, err := stdout.Write(b); err != nil {
		return fail(stderr, "contract", err)
	}
	return exitOK
}
