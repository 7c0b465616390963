package surface_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

const wipeTool = "view_devices__wipe"

// remembering returns a two-phase toolset over reg for consumer ann that
// remembers the confirmations it asks for, minting "t<n>" invocation ids.
func remembering(t *testing.T, reg *surface.Registry) *surface.Toolset {
	t.Helper()
	var n atomic.Int64
	return newToolset(t, reg, surface.ToolsetOptions{
		Consumer: surface.Consumer{ID: "ann", Kind: surface.ConsumerMCPBridge}, Topology: surface.TopologyRemote,
		RememberConfirmations: true, NewInvocationID: func() string { return "t" + strconv.FormatInt(n.Add(1), 10) },
	})
}

// A client that repeats a call answered CONFIRMATION_REQUIRED presents
// the confirmation it was asked for: pending, it gets the same one;
// approved, its retry executes once, under the asking call's invocation
// id, and a duplicate retry by confirmation id replays it; an identical
// call later is a new request; a denial is reported once, then the next
// call asks anew. AS-IDENT-006, AS-CONFIRM-003.
func TestRememberConfirmations_AS_IDENT_006(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	cat := remembering(t, reg).Catalog()
	call := func(input string, opts surface.CallOptions) surface.Result {
		return cat.Call(bg, wipeTool, json.RawMessage(input), opts)
	}
	first := call(`{"ids":["d1","d2"]}`, surface.CallOptions{})
	cid := requireConfirmation(t, first)
	if first.InvocationID != "t1" {
		t.Fatalf("invocation id %s, want the toolset's minted t1", first.InvocationID)
	}
	if again := requireConfirmation(t, call(`{ "ids": ["d1", "d2"] }`, surface.CallOptions{})); again != cid {
		t.Fatal("a pending repeat must show the same confirmation")
	}
	reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
	ok := call(`{"ids":["d1","d2"]}`, surface.CallOptions{})
	surfacetest.RequireOK(t, ok)
	if ran.Load() != 1 || ok.InvocationID != first.InvocationID {
		t.Fatalf("ran %d; invocation ids %s, %s", ran.Load(), first.InvocationID, ok.InvocationID)
	}
	dup := call(`{"ids":["d1","d2"]}`, surface.CallOptions{ConfirmationID: cid})
	surfacetest.RequireOK(t, dup)
	if ran.Load() != 1 || dup.InvocationID != ok.InvocationID {
		t.Fatalf("a duplicate retry ran again (%d) or under another id (%s)", ran.Load(), dup.InvocationID)
	}
	next := requireConfirmation(t, call(`{"ids":["d1","d2"]}`, surface.CallOptions{}))
	if next == cid {
		t.Fatal("an executed confirmation was presented again")
	}
	reg.Confirmations().Resolve(next, surface.Resolution{})
	if r := invalidReason(t, call(`{"ids":["d1","d2"]}`, surface.CallOptions{})); r != "denied" {
		t.Fatal(r)
	}
	if third := requireConfirmation(t, call(`{"ids":["d1","d2"]}`, surface.CallOptions{})); third == next || third == cid {
		t.Fatal("after a denial, a new call asks anew")
	}
	// Other arguments with the evidence: mismatch, nothing runs.
	if r := invalidReason(t, call(`{"ids":["d9"]}`, surface.CallOptions{ConfirmationID: cid})); r != "consumed" && r != "mismatch" {
		t.Fatal(r)
	}
	if ran.Load() != 1 {
		t.Fatalf("ran %d", ran.Load())
	}
}

// A call with a tool-call id of its own is not a repeat: it is judged as
// sent. Without RememberConfirmations a repeat after approval is a new
// request (the model presents the confirmation id itself).
func TestRememberConfirmationsOnlyRepeats(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	cat := remembering(t, reg).Catalog()
	cid := requireConfirmation(t, cat.Call(bg, wipeTool, json.RawMessage(`{"ids":["d1"]}`), surface.CallOptions{}))
	reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
	if other := requireConfirmation(t, cat.Call(bg, wipeTool, json.RawMessage(`{"ids":["d1"]}`), surface.CallOptions{ToolCallID: "mine"})); other == cid {
		t.Fatal("a call with its own id presented a remembered confirmation")
	}
	plain := newToolset(t, reg, surface.ToolsetOptions{Consumer: surface.Consumer{ID: "ann", Kind: surface.ConsumerMCPBridge}, Topology: surface.TopologyRemote}).Catalog()
	if again := requireConfirmation(t, plain.Call(bg, wipeTool, json.RawMessage(`{"ids":["d1"]}`), surface.CallOptions{})); again == cid {
		t.Fatal("a toolset that does not remember presented the confirmation")
	}
	if ran.Load() != 0 {
		t.Fatalf("ran %d", ran.Load())
	}
}

// AS-CONFIRM-004 between the clients of one consumer, through the
// toolset: a client's repeat presents only the confirmation it was asked
// for; another client of the same consumer repeating the call, or
// sending the confirmation's id, is not handed it and executes nothing;
// the asking client's retry executes once.
func TestRememberConfirmationsPerClient_AS_CONFIRM_004(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
	cat := remembering(t, reg).Catalog()
	call := func(client, cid string) surface.Result {
		return cat.Call(bg, wipeTool, json.RawMessage(`{"ids":["d1"]}`), surface.CallOptions{Client: client, ConfirmationID: cid})
	}
	cid := requireConfirmation(t, call("one", ""))
	if other := requireConfirmation(t, call("two", "")); other == cid {
		t.Fatal("client two was handed client one's pending confirmation")
	}
	reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
	if r := invalidReason(t, call("two", cid)); r != "mismatch" {
		t.Fatal(r)
	}
	if again := requireConfirmation(t, call("two", "")); again == cid {
		t.Fatal("client two's repeat presented client one's approval")
	}
	if ran.Load() != 0 {
		t.Fatalf("client two executed on client one's approval (%d)", ran.Load())
	}
	surfacetest.RequireOK(t, call("one", ""))
	surfacetest.RequireOK(t, call("one", cid)) // a duplicate retry replays
	if ran.Load() != 1 {
		t.Fatalf("ran %d", ran.Load())
	}
}

// A retry that found the bound input changed since the approval
// (mismatch) executes nothing and leaves the approval standing; once the
// input is restored the retry is judged on it, not answered from the
// mismatch, and executes once. AS-CONFIRM-001.
func TestRememberConfirmationsMismatchRenews_AS_CONFIRM_001(t *testing.T) {
	reg := surfacetest.NewRegistry(t, nil)
	var ran atomic.Int64
	var mu sync.Mutex
	selected := []string{"d1"}
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "devices.disable", func(context.Context, *surface.ProcedureCall, disableIn) (disableOut, error) {
		ran.Add(1)
		return disableOut{}, nil
	})
	reg.SetProcedureExecutor(x)
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.bulk", Description: "Bulk",
		Procedures: []surface.Capability{surface.Procedure(surface.ProcedureDef[disableIn, disableOut]{
			ID: "domain:devices.disable", Description: "Disable the selection", Effect: surface.EffectDestructive,
			Bound: []string{"ids"}, Bind: func(context.Context) (map[string]any, error) {
				mu.Lock()
				defer mu.Unlock()
				return map[string]any{"ids": slices.Clone(selected)}, nil
			},
		})}})
	sel := func(ids ...string) {
		mu.Lock()
		selected = ids
		mu.Unlock()
	}
	cat := remembering(t, reg).Catalog()
	call := func(cid string) surface.Result {
		return cat.Call(bg, "domain_devices__disable", json.RawMessage(`{"reason":"old"}`), surface.CallOptions{ConfirmationID: cid})
	}
	e := surfacetest.RequireCode(t, call(""), surface.CodeConfirmationRequired)
	cid := e.ConfirmationID()
	reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
	sel("d2")
	if r := invalidReason(t, call(cid)); r != "mismatch" || ran.Load() != 0 {
		t.Fatalf("%s, ran %d", r, ran.Load())
	}
	sel("d1")
	ok := call(cid)
	surfacetest.RequireOK(t, ok)
	dup := call(cid)
	surfacetest.RequireOK(t, dup)
	if ran.Load() != 1 || dup.InvocationID != ok.InvocationID {
		t.Fatalf("ran %d; ids %s, %s", ran.Load(), ok.InvocationID, dup.InvocationID)
	}
}

// The memory forgets a confirmation when it can no longer be used: an
// approval unused for Limits.ConfirmationTTL has expired, and a repeat
// is then a new request at once (no retry presents the dead approval
// first); a retry that settled is replayed to a duplicate retry for
// Limits.DedupeCacheTTL, and after that a duplicate is judged by the
// registry (consumed), never executed again.
func TestRememberConfirmationsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := surface.NewMemorySink(1000)
		reg := surface.New(&surface.Options{Audit: sink, Limits: surface.Limits{ConfirmationTTL: time.Minute, DedupeCacheTTL: 10 * time.Minute}})
		defer reg.Close()
		invalid := func() int { // settled CONFIRMATION_INVALID invocations so far
			n := 0
			for _, e := range sink.Events() {
				if e.Type == surface.AuditInvocationSettled && e.Code == surface.CodeConfirmationInvalid {
					n++
				}
			}
			return n
		}
		var ran atomic.Int64
		surfacetest.MustRegister(t, reg, dangerous(&ran, nil))
		cat := remembering(t, reg).Catalog()
		call := func(input, cid string) surface.Result {
			return cat.Call(bg, wipeTool, json.RawMessage(input), surface.CallOptions{ConfirmationID: cid})
		}

		unused := requireConfirmation(t, call(`{"ids":["a"]}`, ""))
		reg.Confirmations().Resolve(unused, surface.Resolution{Approved: true})
		time.Sleep(time.Minute + time.Second)
		if again := requireConfirmation(t, call(`{"ids":["a"]}`, "")); again == unused || invalid() != 0 {
			t.Fatalf("a repeat after expiry presented the expired approval (%d invalid)", invalid())
		}

		cid := requireConfirmation(t, call(`{"ids":["b"]}`, ""))
		reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true})
		ok := call(`{"ids":["b"]}`, "")
		surfacetest.RequireOK(t, ok)
		time.Sleep(5 * time.Minute) // the confirmation's TTL is over, the result's is not
		dup := call(`{"ids":["b"]}`, cid)
		surfacetest.RequireOK(t, dup)
		if dup.InvocationID != ok.InvocationID {
			t.Fatalf("ids %s, %s", ok.InvocationID, dup.InvocationID)
		}
		time.Sleep(6 * time.Minute)
		if r := invalidReason(t, call(`{"ids":["b"]}`, cid)); r != "consumed" {
			t.Fatal(r)
		}
		if ran.Load() != 1 {
			t.Fatalf("ran %d", ran.Load())
		}
	})
}
