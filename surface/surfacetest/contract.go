package surfacetest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
)

// ContractOptions configure RequireContract and RequireContractFunc. The
// zero value (or nil) takes the contract for Consumer() and fails on any
// difference.
type ContractOptions struct {
	// Consumers are the consumers the contract is taken for. Empty means
	// Consumer(), {id: "test", kind: "test"}.
	Consumers []surface.Consumer
	// Fail lists the classes of change that fail the test. Nil means
	// every difference fails, down to the file's bytes, as with any
	// golden file; contract.Classes{contract.Widening} fails only on what
	// widens and logs the rest, as a CI gate would.
	Fail contract.Classes
}

// RequireContract compares the contract of reg, as each consumer of opts
// sees it (see contract.FromRegistry), with the contract file
// testdata/name. When they differ it fails the test with the classified
// changes (contract.Compare) of a failing class, and logs the others.
//
// When the test binary runs with -update, RequireContract writes the
// contract to the file instead (creating directories as needed), so a
// reviewed change is accepted by running the test once with -update and
// committing the file; the test package defines the flag, as for
// RequireGolden.
func RequireContract(tb testing.TB, name string, reg *surface.Registry, opts *ContractOptions) {
	tb.Helper()
	o := contractOptions(opts)
	c, err := contract.FromRegistry(reg, o.Consumers...)
	if err != nil {
		tb.Fatalf("contract %s: %v", name, err)
	}
	requireContract(tb, name, c, o)
}

// RequireContractFunc is RequireContract for an application whose
// registry depends on the consumer: build returns the registry (in the
// state the contract describes) for one consumer, and is called once per
// consumer. The registries are the caller's: build registers their
// cleanup with tb (NewRegistry does).
func RequireContractFunc(tb testing.TB, name string, build func(tb testing.TB, c surface.Consumer) *surface.Registry, opts *ContractOptions) {
	tb.Helper()
	o := contractOptions(opts)
	parts := make([]*contract.Contract, 0, len(o.Consumers))
	for _, consumer := range o.Consumers {
		c, err := contract.FromRegistry(build(tb, consumer), consumer)
		if err != nil {
			tb.Fatalf("contract %s: %s: %v", name, consumer.Key(), err)
		}
		parts = append(parts, c)
	}
	c, err := contract.Combine(parts...)
	if err != nil {
		tb.Fatalf("contract %s: %v", name, err)
	}
	requireContract(tb, name, c, o)
}

func contractOptions(opts *ContractOptions) ContractOptions {
	var o ContractOptions
	if opts != nil {
		o = *opts
	}
	if len(o.Consumers) == 0 {
		o.Consumers = []surface.Consumer{Consumer()}
	}
	return o
}

// requireContract compares c with the file, or writes it with -update.
func requireContract(tb testing.TB, name string, c *contract.Contract, o ContractOptions) {
	tb.Helper()
	got, err := c.Encode()
	if err != nil {
		tb.Fatalf("contract %s: %v", name, err)
	}
	path := filepath.Join("testdata", name)
	if updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatalf("contract %s: %v", path, err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatalf("contract %s: %v", path, err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		tb.Fatalf("contract %s does not exist (run the test with -update to create it)", path)
	}
	if err != nil {
		tb.Fatalf("contract %s: %v", path, err)
	}
	if bytes.Equal(got, data) {
		return
	}
	want, err := contract.Parse(data)
	if err != nil {
		tb.Fatalf("contract %s: %v (run the test with -update to rewrite it)", path, err)
	}
	changes, err := contract.Compare(want, c)
	if err != nil {
		tb.Fatalf("contract %s: %v", path, err)
	}
	failing := changes
	if o.Fail != nil {
		failing = o.Fail.Failing(changes)
	}
	switch {
	case len(failing) > 0:
		tb.Fatalf("contract %s changed (review, then run the test with -update to accept it):\n%s", path, table(failing))
	case len(changes) > 0:
		tb.Logf("contract %s changed, in no failing class (run the test with -update to accept it):\n%s", path, table(changes))
	case o.Fail == nil:
		tb.Fatalf("contract %s differs in form only (run the test with -update to rewrite it)%s", path, firstDifference(got, data))
	}
}

// table formats changes for a test's output.
func table(changes []contract.Change) string {
	var b strings.Builder
	_ = contract.WriteTable(&b, changes)
	return b.String()
}
