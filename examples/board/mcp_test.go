package main

import (
	"slices"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// An agent plays the board over real HTTP with the go-sdk client and the
// session's token: it lists the tools, reads the board, moves a card and
// selects cards; its delete of the selection needs the user's approval
// (CONFIRMATION_REQUIRED), which the user gives through the Host's API
// (the page's Approve button decides the same record); its retry then
// deletes exactly the approved cards, and its read shows it.
// AS-ADAPTER-002 (envelopes relayed), AS-AVAIL-001 (delete available only
// with a selection), AS-BIND-004 (the selection read live at the call).
func TestAgentOverMCP(t *testing.T) {
	sv := serve(t, webhost.Options{})
	s := sv.session(t, "alice")
	cs := sv.dial(t, s.Token())

	listed := tools(t, cs)
	for _, id := range []string{"view:kanban.board.read", "view:kanban.board.select", "domain:cards.move"} {
		if listed[id] == nil {
			t.Fatalf("no tool for %s among %v", id, keys(listed))
		}
	}
	if listed["domain:cards.delete"] != nil && listed["domain:cards.delete"].Meta["agentsurface/available"] != false {
		t.Fatal("delete is available with nothing selected")
	}
	if st := read(t, cs); len(st.Cards) != 4 || len(st.Selected) != 0 || st.column("c1") != "todo" {
		t.Fatalf("the board: %+v", st)
	}

	requireCode(t, call(t, cs, "domain:cards.move", `{"id":"c1","column":"doing"}`), "ok")
	requireCode(t, call(t, cs, "domain:cards.move", `{"id":"c1","column":"nowhere"}`), string(surface.CodePreconditionFailed))
	requireCode(t, call(t, cs, "view:kanban.board.select", `{"ids":["c1","c2"]}`), "ok")
	if st := read(t, cs); st.column("c1") != "doing" || !slices.Equal(st.Selected, []string{"c1", "c2"}) {
		t.Fatalf("after move and select: %+v", st)
	}

	r := call(t, cs, "domain:cards.delete", `{}`)
	requireCode(t, r, string(surface.CodeConfirmationRequired))
	p := s.Pending()
	if len(p) != 1 || p[0].CapabilityID != "domain:cards.delete" || string(p[0].Input) != `{"ids":["c1","c2"]}` {
		t.Fatalf("pending: %+v", p)
	}
	if len(read(t, cs).Cards) != 4 {
		t.Fatal("a card went before the user approved")
	}
	if _, ok := s.Decide(p[0].ConfirmationID, true, "alice (test)"); !ok {
		t.Fatal("the approval was refused")
	}
	requireCode(t, call(t, cs, "domain:cards.delete", `{}`), "ok")
	if st := read(t, cs); len(st.Cards) != 2 || st.column("c1") != "" || st.column("c2") != "" || len(st.Selected) != 0 {
		t.Fatalf("after the delete: %+v", st)
	}
	d := s.Decisions()
	if len(d) != 1 || d[0].Outcome != surface.OutcomeApproved || d[0].Call == nil || !d[0].Call.Executed || d[0].Call.Status != surface.StatusOK {
		t.Fatalf("decisions: %+v", d)
	}
	// The approval was spent: deleting again needs a new one.
	requireCode(t, call(t, cs, "view:kanban.board.select", `{"ids":["c3"]}`), "ok")
	requireCode(t, call(t, cs, "domain:cards.delete", `{}`), string(surface.CodeConfirmationRequired))
}

// What an attacker driving the agent tries fails: naming the cards to
// delete (the ids are bound to the page's selection and locked), changing
// the selection after the user approved (the approval binds the exact
// input), and having a viewer's delete approved (the domain service
// refuses it: an approval is no permission). AS-INVOKE-004, AS-CONFIRM-001,
// AS-BIND-002.
func TestAgentCannotWidenWhatTheUserApproved(t *testing.T) {
	sv := serve(t, webhost.Options{})
	s := sv.session(t, "alice")
	cs := sv.dial(t, s.Token())
	requireCode(t, call(t, cs, "view:kanban.board.select", `{"ids":["c1"]}`), "ok")

	r := call(t, cs, "domain:cards.delete", `{"ids":["c2","c3","c4"]}`)
	requireCode(t, r, string(surface.CodeInvalidInput))
	if len(s.Pending()) != 0 {
		t.Fatal("a locked field reached the user's approvals")
	}

	requireCode(t, call(t, cs, "domain:cards.delete", `{}`), string(surface.CodeConfirmationRequired))
	p := s.Pending()[0]
	s.Decide(p.ConfirmationID, true, "alice (test)")
	requireCode(t, call(t, cs, "view:kanban.board.select", `{"ids":["c1","c2","c3","c4"]}`), "ok")
	if r := call(t, cs, "domain:cards.delete", `{}`); r.Status == surface.StatusOK {
		t.Fatal("the approval of c1 deleted a wider selection")
	}
	if st := read(t, cs); len(st.Cards) != 4 {
		t.Fatalf("cards went: %+v", st)
	}

	// victor's session: the page and the agent may ask, the store refuses.
	v := sv.session(t, "victor")
	vc := sv.dial(t, v.Token())
	requireCode(t, call(t, vc, "domain:cards.move", `{"id":"c1","column":"done"}`), string(surface.CodeNotAuthorized))
	requireCode(t, call(t, vc, "view:kanban.board.select", `{"ids":["c4"]}`), "ok")
	requireCode(t, call(t, vc, "domain:cards.delete", `{}`), string(surface.CodeConfirmationRequired))
	if _, ok := s.Decide(v.Pending()[0].ConfirmationID, true, "alice (test)"); ok {
		t.Fatal("alice's session decided victor's approval")
	}
	v.Decide(v.Pending()[0].ConfirmationID, true, "victor (test)")
	r = call(t, vc, "domain:cards.delete", `{}`)
	requireCode(t, r, string(surface.CodeNotAuthorized))
	if r.Error.Details["origin"] != "server" {
		t.Fatalf("details: %+v", r.Error.Details)
	}
	if d := v.Decisions(); len(d) != 1 || d[0].Call == nil || d[0].Call.Code != surface.CodeNotAuthorized {
		t.Fatalf("victor's decisions: %+v", d)
	}
	if st := read(t, cs); len(st.Cards) != 4 || st.column("c1") != "todo" {
		t.Fatalf("victor changed the board: %+v", st)
	}
}

// A session's tools exist while a page shows it: an agent holding the
// token of a session no page shows sees none (the browser test shows them
// come with the page and go after it). AS-LIFE-001.
func TestNoPageNoTools(t *testing.T) {
	sv := serve(t, webhost.Options{})
	s, err := sv.h.NewSession(webhost.SessionOptions{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tools(t, sv.dial(t, s.Token())); len(got) != 0 {
		t.Fatalf("tools without a page: %v", keys(got))
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
