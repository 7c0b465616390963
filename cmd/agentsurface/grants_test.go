package main

import (
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface/contract"
)

// agentsurface diff reports a capability that became grantable, or whose
// grant ceiling widened, as a widening and fails on it by default; the
// converse passes as a narrowing (issue "standing grants" item 5).
func TestDiffStandingGrants(t *testing.T) {
	dir := t.TempDir()
	with := func(g *contract.GrantCeiling) *contract.Contract {
		c := oneCapability(`{"type":"object"}`)
		c.Consumers[0].Capabilities[0].StandingGrants = g
		return c
	}
	none := writeContract(t, dir, "none.json", with(nil))
	short := writeContract(t, dir, "short.json", with(&contract.GrantCeiling{MaxTTLMs: 60000, MaxUses: 3}))
	long := writeContract(t, dir, "long.json", with(&contract.GrantCeiling{MaxTTLMs: 3600000, MaxUses: 3}))

	for _, tc := range []struct{ old, new, note string }{{none, short, "became grantable"}, {short, long, "ceiling widened"}} {
		code, out, errOut := cli(t, "diff", tc.old, tc.new)
		if code != exitFail || !strings.Contains(errOut, "failing class") {
			t.Fatalf("%s: exit %d\n%s\n%s", tc.note, code, out, errOut)
		}
		for _, want := range []string{"widening", "standingGrants", tc.note, "1 widening"} {
			if !strings.Contains(out, want) {
				t.Fatalf("%s: the table lacks %q:\n%s", tc.note, want, out)
			}
		}
	}
	for _, tc := range [][2]string{{short, none}, {long, short}} {
		if code, out, _ := cli(t, "diff", tc[0], tc[1]); code != exitOK || !strings.Contains(out, "narrowing") {
			t.Fatalf("narrowed: exit %d\n%s", code, out)
		}
	}
}
