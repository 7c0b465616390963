package main

import (
	"strings"
	"testing"
)

// demo --scripted with --public-url hands the agent approve links under
// the public URL (the transcript shows them whole), and the headless
// user still decides on the approve page, which it reaches where the
// agent does; without it, the links are under the address the agent
// connected to.
func TestDemoScriptedApproveLinks(t *testing.T) {
	code, out, errOut := cli(t, "demo", "--scripted", "--approve", "--public-url", "https://devices.example.com/")
	if code != exitOK || strings.Count(out, "     ↳ https://devices.example.com/agentsurface/approve/cnf_") != 2 ||
		!strings.Contains(out, "approved with a grant") || !strings.Contains(out, "no question asked: allowed by gnt_") {
		t.Fatalf("%d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "demo", "--scripted", "--approve")
	if code != exitOK || strings.Count(out, "     ↳ http://127.0.0.1:") != 2 {
		t.Fatalf("%d\n%s\n%s", code, out, errOut)
	}
}
