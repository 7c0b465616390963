package console_test

// Idempotency keys belong to the agent that chose them (AS-IDENT-004),
// through the console's MCP endpoint: two sessions' agents of one user,
// on one process and on two replicas.

import (
	"encoding/json"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/examples/devices/console"
	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/examples/devices/domain/pgdomain"
	"github.com/agentsurface/agentsurface/surface"
)

// sessionAgent is one session's MCP agent.
type sessionAgent struct {
	name string
	s    *console.Session // the owner's session, which the user approves in
	m    *agent.MCP
}

// callID calls the tool of capabilityID, listed afresh, with opts in the
// call's _meta.
func (a sessionAgent) callID(t *testing.T, capabilityID, args string, opts agent.CallOptions) surface.Result {
	t.Helper()
	tools, err := a.m.List(bg)
	if err != nil {
		t.Fatalf("%s: list: %v", a.name, err)
	}
	for _, tool := range tools {
		if tool.CapabilityID == capabilityID {
			res, err := a.m.CallWith(bg, tool.Name, json.RawMessage(args), opts)
			if err != nil {
				t.Fatalf("%s: call %s: %v", a.name, capabilityID, err)
			}
			return res
		}
	}
	t.Fatalf("%s: no tool for %s", a.name, capabilityID)
	return surface.Result{}
}

// disableApproved selects device, asks to disable it with reason under
// invocation id id, has the user approve the card, and returns the
// answer to the retry that presents the approval, and the approval.
func (a sessionAgent) disableApproved(t *testing.T, device, reason, id string) (surface.Result, string) {
	t.Helper()
	if res := a.callID(t, "view:devices.table.selectRows", `{"ids":["`+device+`"]}`, agent.CallOptions{}); res.Status != surface.StatusOK {
		t.Fatalf("%s: select %s: %+v", a.name, device, res.Error)
	}
	args := `{"reason":"` + reason + `"}`
	res := a.callID(t, domain.DisableID, args, agent.CallOptions{InvocationID: id})
	if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired {
		t.Fatalf("%s: disable %s: want CONFIRMATION_REQUIRED, got %+v %+v", a.name, device, res, res.Error)
	}
	cid := res.Error.ConfirmationID()
	if _, ok := a.s.Decide(cid, true, "olivia (test)"); !ok {
		t.Fatalf("%s: the user could not approve %s", a.name, cid)
	}
	return a.callID(t, domain.DisableID, args, agent.CallOptions{InvocationID: id, ConfirmationID: cid}), cid
}

// enable selects device and enables it under invocation id id.
func (a sessionAgent) enable(t *testing.T, device, id string) {
	t.Helper()
	if res := a.callID(t, "view:devices.table.selectRows", `{"ids":["`+device+`"]}`, agent.CallOptions{}); res.Status != surface.StatusOK {
		t.Fatalf("%s: select %s: %+v", a.name, device, res.Error)
	}
	res := a.callID(t, domain.EnableID, `{"reason":"back in service"}`, agent.CallOptions{InvocationID: id})
	if res.Status != surface.StatusOK || string(res.Output) != `{"enabled":1}` {
		t.Fatalf("%s: enable %s: %+v %s", a.name, device, res.Error, res.Output)
	}
}

// sameIDAcrossSessions plays the finding of the attack round: agent A
// (session 1) disables d5 with invocation id X and enables it again;
// agent B (session 2, the same user) disables d5 with X and the user
// approves B's card: B must be answered with what B's call did, and d5
// must be disabled. Agent C (session 3) then disables d6 with X, another
// request: approved, it executes — no INVOCATION_CONFLICT telling C that
// the id was used. Each agent's own retry replays its own answer.
// status reads a device's status in the domain, disableRecords counts
// its audit_log records of disables.
func sameIDAcrossSessions(t *testing.T, a, b, c sessionAgent, status func(device string) string, disableRecords func(device string) int) {
	t.Helper()
	const x = "tool-call-7f3a"
	resA, cidA := a.disableApproved(t, "d5", "maintenance", x)
	if res := resA; res.Status != surface.StatusOK || string(res.Output) != `{"disabled":1}` {
		t.Fatalf("A's disable: %+v %s", res.Error, res.Output)
	}
	a.enable(t, "d5", "tool-call-91c2")
	if s := status("d5"); s != "offline" {
		t.Fatalf("d5 is %s after A enabled it", s)
	}

	res, cidB := b.disableApproved(t, "d5", "maintenance", x)
	if res.Status != surface.StatusOK || string(res.Output) != `{"disabled":1}` {
		t.Fatalf("B's approved disable with A's id: %+v %s", res.Error, res.Output)
	}
	if s := status("d5"); s != "disabled" {
		t.Fatalf("B was told %s, but d5 is %s: the approved call did not execute", res.Output, s)
	}
	if n := disableRecords("d5"); n != 2 {
		t.Fatalf("%d disable records of d5, want A's and B's", n)
	}

	res, cidC := c.disableApproved(t, "d6", "another request", x)
	if res.Status != surface.StatusOK || string(res.Output) != `{"disabled":1}` || status("d6") != "disabled" {
		t.Fatalf("C's approved disable of d6 with the id A and B used: %+v %s, d6 %s", res.Error, res.Output, status("d6"))
	}

	// Each agent's retry under X is answered with its own result, and
	// executes nothing.
	for _, r := range []struct {
		ag          sessionAgent
		reason, cid string
	}{{a, "maintenance", cidA}, {b, "maintenance", cidB}, {c, "another request", cidC}} {
		res := r.ag.callID(t, domain.DisableID, `{"reason":"`+r.reason+`"}`, agent.CallOptions{InvocationID: x, ConfirmationID: r.cid})
		if res.Status != surface.StatusOK || string(res.Output) != `{"disabled":1}` {
			t.Fatalf("%s's retry: %+v %s, want its own result", r.ag.name, res.Error, res.Output)
		}
	}
	if n := disableRecords("d5"); n != 2 {
		t.Fatalf("%d disable records of d5 after the retries, want 2", n)
	}
}

// On one process: the console's MCP endpoint, three sessions of one
// user, each with its MCP agent. AS-IDENT-004.
func TestInvocationIDOfAnotherSessionExecutes(t *testing.T) {
	d := newDemo(t, console.Options{})
	var agents []sessionAgent
	for _, name := range []string{"A", "B", "C"} {
		s := d.session(t)
		agents = append(agents, sessionAgent{name: name, s: s, m: d.dial(t, s.Token())})
	}
	disableRecords := func(device string) int {
		h, err := d.store.History(bg, console.Operator, device, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range h {
			if c.Action == "disable" {
				n++
			}
		}
		return n
	}
	sameIDAcrossSessions(t, agents[0], agents[1], agents[2], func(device string) string { return d.status(t)[device] }, disableRecords)
}

// On two replicas sharing a PostgreSQL domain database: A's session is
// owned by replica a, B's and C's by b, and every agent talks to the
// replica that does not own its session (its calls are forwarded).
// AS-IDENT-004 across replicas.
func TestInvocationIDOfAnotherSessionExecutesAcrossReplicas(t *testing.T) {
	domainURL := pg.Database(t)
	c := newClusterOn(t, 2, func() (*domain.Store, error) { return pgdomain.Open(bg, domainURL) })
	ra, rb := c.nodes[0], c.nodes[1]
	mk := func(name string, owner, via *node) sessionAgent {
		s, err := owner.app.NewSession(console.SessionOptions{KeepShown: true})
		if err != nil {
			t.Fatal(err)
		}
		m, err := agent.Dial(bg, via.mcpURL(), &agent.DialOptions{Token: s.Token()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return sessionAgent{name: name, s: s, m: m}
	}
	a, b, cc := mk("A", ra, rb), mk("B", rb, ra), mk("C", rb, ra)
	disableRecords := func(device string) int {
		h, err := ra.store.History(bg, console.Operator, device, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range h {
			if c.Action == "disable" {
				n++
			}
		}
		return n
	}
	sameIDAcrossSessions(t, a, b, cc, func(device string) string { return rb.status(t)[device] }, disableRecords)
	if ra.dir().Stats().Forwarded == 0 || rb.dir().Stats().Forwarded == 0 {
		t.Fatalf("the calls were not forwarded: a %+v, b %+v", ra.dir().Stats(), rb.dir().Stats())
	}
}
