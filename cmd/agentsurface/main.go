// Command agentsurface runs the devices console demo and inspects
// agentsurface MCP endpoints.
//
// Usage:
//
//	agentsurface demo [flags]                 run the devices console
//	agentsurface inspect <mcp-url> [--token T] [--json | --describe]
//	                                          list the tools of an endpoint
//	agentsurface call <mcp-url> <tool> [json] [--token T] [--wait | --confirmation-id ID]
//	                                          call one tool, print the result
//	agentsurface contract <mcp-url> [--token T] print an endpoint's contract
//	agentsurface diff OLD NEW [--fail widening] classify the changes of a contract
//	agentsurface version                      print the version
//
// Every command takes --help. Exit status: 0 on success, 1 on failure, 2
// on a usage error. Errors go to standard error.
//
// The default build is lean. The build tag postgres adds demo --postgres
// (several replicas on PostgreSQL), otel adds /metrics and OTLP trace
// export: go build -tags 'postgres otel' ./cmd/agentsurface. See
// features.go and agentsurface demo --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `agentsurface runs the devices console demo and inspects agentsurface MCP endpoints.

Usage:
  agentsurface demo [flags]                            run the devices console
  agentsurface inspect <mcp-url> [--token T] [--json | --describe]
                                                       list the tools of an MCP endpoint
  agentsurface call <mcp-url> <tool> [json] [--token T] [--wait | --confirmation-id ID]
                                                       call one tool and print the result envelope
  agentsurface contract <mcp-url> [--token T]          print the contract of an MCP endpoint
  agentsurface diff OLD NEW [--fail widening] [--json] classify the changes between two contracts
  agentsurface version                                 print the version (also --version)

Run "agentsurface <command> --help" for a command's flags.
`

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "demo":
		return demo(ctx, rest, stdout, stderr)
	case "inspect":
		return inspect(ctx, rest, stdout, stderr)
	case "call":
		return call(ctx, rest, stdout, stderr)
	case "contract":
		return contractCmd(ctx, rest, stdout, stderr)
	case "diff":
		return diffCmd(rest, stdout, stderr)
	case "version":
		return version(rest, stdout, stderr)
	case "--version", "-version":
		printVersion(stdout)
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "agentsurface: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// parse parses flags that may come before, between or after positional
// arguments, and returns the positional ones. done is set when the
// command should exit with code (help or a usage error).
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (positional []string, code int, done bool) {
	fs.SetOutput(io.Discard)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(stdout)
				fs.Usage()
				return nil, exitOK, true
			}
			fmt.Fprintf(stderr, "agentsurface %s: %v\n", fs.Name(), err)
			fs.SetOutput(stderr)
			fs.Usage()
			return nil, exitUsage, true
		}
		if fs.NArg() == 0 {
			return positional, 0, false
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// fail prints an error for command cmd and returns the failure status.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "agentsurface %s: %v\n", cmd, err)
	return exitFail
}
