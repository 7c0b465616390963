package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentsurface/agentsurface/surface/contract"
)

// diffCmd classifies the changes between two contract files and fails
// when one is of a class --fail names.
func diffCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	failOn := fs.String("fail", "widening", "classes that fail: a comma-separated list of widening, narrowing and neutral, or any, or none")
	asJSON := fs.Bool("json", false, "print the changes as JSON, for CI")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: agentsurface diff OLD NEW [--fail widening] [--json]

Compares two agentsurface contract files and prints every change with its
class: widening (a consumer may do more, or the change cannot be shown not
to give it more), narrowing or neutral. The rules are those of package
surface/contract: a schema change the checker cannot prove safe (a keyword
or construct it does not model, or one too complex to compare within its
work budget) is a widening, "unproven". An empty OLD file (such as
/dev/null) stands for a surface with no consumer: every consumer NEW lists
is new. A file larger than 64 MiB, a schema larger than 1 MiB or a
contract with more than 32 MiB of schemas is refused.

The exit status is 1 when a change is of a class --fail names (by default
widening) or a file cannot be read, 0 otherwise, 2 on a usage error.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, code, done := parse(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "agentsurface diff: want two arguments, the old and the new contract file")
		return exitUsage
	}
	classes, err := contract.ParseClasses(*failOn)
	if err != nil {
		fmt.Fprintf(stderr, "agentsurface diff: --fail: %v\n", err)
		return exitUsage
	}
	newC, err := readContract(pos[1])
	if err != nil {
		return fail(stderr, "diff", err)
	}
	oldC, err := readContract(pos[0])
	if errors.Is(err, errEmpty) {
		oldC, err = &contract.Contract{Format: contract.Format, Version: contract.Version, Source: newC.Source}, nil
	}
	if err != nil {
		return fail(stderr, "diff", err)
	}
	changes, err := contract.Compare(oldC, newC)
	if err != nil {
		return fail(stderr, "diff", err)
	}
	failing := classes.Failing(changes)
	if *asJSON {
		if changes == nil {
			changes = []contract.Change{}
		}
		if classes == nil {
			classes = contract.Classes{}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Changes []contract.Change `json:"changes"`
			Fail    contract.Classes  `json:"fail"`
			Failing int               `json:"failing"`
			Summary string            `json:"summary"`
		}{changes, classes, len(failing), contract.Summary(changes)}); err != nil {
			return fail(stderr, "diff", err)
		}
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return fail(stderr, "diff", err)
		}
	} else if err := contract.WriteTable(stdout, changes); err != nil {
		return fail(stderr, "diff", err)
	}
	if len(failing) > 0 {
		fmt.Fprintf(stderr, "agentsurface diff: %d of the changes are of a failing class (--fail %s)\n", len(failing), *failOn)
		return exitFail
	}
	return exitOK
}

// errEmpty reports an empty contract file.
var errEmpty = errors.New("empty file")

// readContract reads and parses a contract file of at most
// contract.MaxFileBytes.
func readContract(path string) (*contract.Contract, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := func(size int64) error {
		return fmt.Errorf("%s: %w", path, &contract.LimitError{What: "the file", Size: int(size), Limit: contract.MaxFileBytes})
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > contract.MaxFileBytes {
		return nil, tooLarge(fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, contract.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > contract.MaxFileBytes {
		return nil, tooLarge(int64(len(data)))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errEmpty
	}
	c, err := contract.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
