package surfacetest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/contract"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// AS-TEST-001: RequireContract writes the contract with -update, passes
// while it holds, and fails with the classified changes when it no
// longer does; ContractOptions.Fail picks the classes that fail.
func TestRequireContract_AS_TEST_001(t *testing.T) {
	t.Chdir(t.TempDir())
	reg, d := devicesRegistry(t)
	opts := &surfacetest.ContractOptions{Consumers: []surface.Consumer{{ID: "agent", Kind: surface.ConsumerMCPBridge}}}

	setUpdate(t, false)
	fatal(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg, opts) }, "testdata/devices.json", "does not exist", "-update")
	setUpdate(t, true)
	passes(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg, opts) })
	setUpdate(t, false)
	data, err := os.ReadFile(filepath.Join("testdata", "devices.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := contract.Parse(data)
	if err != nil || len(c.Consumers) != 1 || c.Consumers[0].Name != "mcp-bridge:agent" {
		t.Fatalf("-update wrote %v, %+v", err, c)
	}
	passes(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg, opts) })

	// A second table widens (new capabilities): every class fails by
	// default, and so does widening alone.
	h := surfacetest.MustRegister(t, reg, d.table("side"))
	msg := fatal(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg, opts) },
		"testdata/devices.json changed", "widening", "view:devices.table.readState @ devices.table/side", "-update")
	if !strings.Contains(msg, "CLASS") {
		t.Fatalf("no table in %q", msg)
	}
	widening := &surfacetest.ContractOptions{Consumers: opts.Consumers, Fail: contract.Classes{contract.Widening}}
	fatal(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg, widening) }, "widening")
	h.Unregister()

	// A component without capabilities is a neutral change: it fails by
	// default, not when only widening fails.
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.extra", Description: "Nothing to do"})
	fatal(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg, opts) }, "neutral", "component devices.extra/default")
	passes(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg, widening) })

	// A file that differs in form only: exact by default.
	reg2, _ := devicesRegistry(t)
	if err := os.WriteFile(filepath.Join("testdata", "devices.json"), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	fatal(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg2, opts) }, "form only", "-update")
	passes(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg2, widening) })

	// A file that is not a contract.
	if err := os.WriteFile(filepath.Join("testdata", "devices.json"), []byte(`{"format":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fatal(t, func(tb *fakeTB) { surfacetest.RequireContract(tb, "devices.json", reg2, opts) }, "not a contract", "-update")
}

// AS-TEST-001: RequireContractFunc builds a registry per consumer, for
// applications whose registry depends on who looks; the default consumer
// is the test consumer.
func TestRequireContractFunc_AS_TEST_001(t *testing.T) {
	t.Chdir(t.TempDir())
	agent := surface.Consumer{ID: "agent", Kind: surface.ConsumerMCPBridge}
	built := map[string]int{}
	build := func(tb testing.TB, c surface.Consumer) *surface.Registry {
		built[c.Key()]++
		reg := surfacetest.NewRegistry(tb, nil)
		d := &devices{}
		reg.SetProcedureExecutor(d.executor())
		table := d.table("main")
		if c.Kind == surface.ConsumerMCPBridge { // remote agents may not disable
			table.Procedures = nil
		}
		surfacetest.MustRegister(tb, reg, table)
		return reg
	}
	opts := &surfacetest.ContractOptions{Consumers: []surface.Consumer{agent, surfacetest.Consumer()}}
	setUpdate(t, true)
	passes(t, func(tb *fakeTB) { surfacetest.RequireContractFunc(tb, "devices.json", build, opts) })
	setUpdate(t, false)
	passes(t, func(tb *fakeTB) { surfacetest.RequireContractFunc(tb, "devices.json", build, opts) })
	if built["mcp-bridge:agent"] != 2 || built["test:test"] != 2 {
		t.Fatalf("built %v", built)
	}
	data, _ := os.ReadFile(filepath.Join("testdata", "devices.json"))
	c, err := contract.Parse(data)
	if err != nil || len(c.Consumers) != 2 {
		t.Fatalf("%v %+v", err, c)
	}
	for _, v := range c.Consumers {
		has := strings.Contains(string(data), "domain:devices.disable")
		if n := len(v.Capabilities); v.Name == "mcp-bridge:agent" && n != 3 || v.Name == "test:test" && n != 4 || !has {
			t.Fatalf("%s: %d capabilities", v.Name, n)
		}
	}
	// The default consumer is the test consumer.
	setUpdate(t, true)
	passes(t, func(tb *fakeTB) { surfacetest.RequireContractFunc(tb, "default.json", build, nil) })
	data, _ = os.ReadFile(filepath.Join("testdata", "default.json"))
	if c, err := contract.Parse(data); err != nil || len(c.Consumers) != 1 || c.Consumers[0].Name != "test:test" {
		t.Fatalf("%v %+v", err, c)
	}
	// A builder whose registry is closed fails the test.
	closed := func(tb testing.TB, c surface.Consumer) *surface.Registry {
		reg := build(tb, c)
		_ = reg.Close()
		return reg
	}
	fatal(t, func(tb *fakeTB) { surfacetest.RequireContractFunc(tb, "devices.json", closed, opts) }, "closed")
}
