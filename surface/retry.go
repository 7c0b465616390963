package surface

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// A confirmation's retry: the call that presents, as evidence, the
// confirmation the registry asked a client for (semantics §13). Every
// retry of this module is made here, whoever makes it: the toolset's
// wait mode once the user decided, a two-phase call that sends a
// confirmation id, and, with ToolsetOptions.RememberConfirmations (which
// mcpsurface sets), a client's repeat of the call that was asked.
//
// A retry targets the registration the confirmation was asked for
// (staleness beats approval) and sends no version hint: the approval,
// bound to the exact input, postdates any change of the surface. The
// evidence binds to the client that asked (InvokeOptions.Client), so no
// other client of the consumer can present it, whatever resolves them to
// one consumer.

// presenting is inv, an invocation that got CONFIRMATION_REQUIRED, as the
// retry that presents confirmation cid under invocation id id.
func presenting(inv Invocation, cid, id string) Invocation {
	inv.InvocationID, inv.ConfirmationID, inv.SurfaceVersion = id, cid, ""
	return inv
}

// waitAndRetry waits for the user's decision on the confirmation res asks
// for and, once approved, presents it under the asking call's invocation
// id. A denial comes back as CONFIRMATION_INVALID, never retried.
func (ts *Toolset) waitAndRetry(ctx context.Context, inv Invocation, client string, res Result) Result {
	cid := res.Error.ConfirmationID()
	if cid == "" {
		return res
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ts.ctx, cancel) // Close ends the wait
	defer stop()
	ts.r.Confirmations().Wait(waitCtx, cid)
	if ts.ctx.Err() != nil {
		return res // closed meanwhile: the original result
	}
	return ts.r.Invoke(ctx, presenting(inv, cid, res.InvocationID), InvokeOptions{Consumer: ts.opts.Consumer, Client: client})
}

// maxAsked bounds the confirmations a toolset remembers: far more than a
// consumer may have pending (Limits.MaxPendingConfirmationsPerConsumer).
const maxAsked = 256

// asked is a confirmation the registry asked one client for.
type asked struct {
	client         string
	tool           string // the tool called
	key            string // callKey of the call that was asked
	confirmationID string
	// target is the invocation that was asked: the capability and
	// registration a retry targets.
	target Invocation
	input  bool // the capability takes input (it is not an observation)
	// invocationID is the id the retries of the asking call use: that
	// call's, or a fresh one after a retry found the input changed (a
	// mismatch, which the registry replays under the old id). Guarded by
	// retries.mu.
	invocationID string
	// expires is when the record is no use any more: the confirmation's
	// TTL after it was asked, and the dedupe TTL after a retry of the
	// asking call settled (a duplicate retry then replays the result).
	// Guarded by retries.mu.
	expires time.Time
}

// askedKey is a client's confirmation id, or a client's call.
type askedKey struct{ client, key string }

// retries remembers the confirmations a toolset's clients were asked for,
// by client and confirmation id, and by client and call (tool and
// canonical arguments), so that a client's retry presents the
// confirmation it was asked for and no other. It is bounded (maxAsked,
// oldest out) and forgets a record when it expires. It is safe for
// concurrent use.
type retries struct {
	mu    sync.Mutex
	ids   map[askedKey]*asked
	calls map[askedKey]*asked
	order []*asked // oldest first
}

// add remembers rec, unless its client's confirmation is known already.
func (m *retries) add(rec *asked, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := askedKey{rec.client, rec.confirmationID}
	if old := m.ids[id]; old != nil && now.Before(old.expires) {
		return
	}
	if m.ids == nil {
		m.ids, m.calls = map[askedKey]*asked{}, map[askedKey]*asked{}
	}
	m.order = slices.DeleteFunc(m.order, func(r *asked) bool {
		if now.Before(r.expires) {
			return false
		}
		m.dropLocked(r)
		return true
	})
	if n := len(m.order) - maxAsked + 1; n > 0 { // the registry expires them long before
		for _, r := range m.order[:n] {
			m.dropLocked(r)
		}
		m.order = slices.Delete(m.order, 0, n)
	}
	m.order = append(m.order, rec)
	m.ids[id] = rec
	m.calls[askedKey{rec.client, rec.key}] = rec
}

// dropLocked forgets r. m.mu is held.
func (m *retries) dropLocked(r *asked) {
	if id := (askedKey{r.client, r.confirmationID}); m.ids[id] == r {
		delete(m.ids, id)
	}
	if k := (askedKey{r.client, r.key}); m.calls[k] == r {
		delete(m.calls, k)
	}
}

// byID returns client's record of confirmation cid, or nil.
func (m *retries) byID(client, cid string, now time.Time) *asked {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.ids[askedKey{client, cid}]; r != nil && now.Before(r.expires) {
		return r
	}
	return nil
}

// byCall returns the record of the confirmation client was asked for on
// this call, or nil. The call's key is computed only when some call has
// one.
func (m *retries) byCall(client, tool string, input json.RawMessage, now time.Time) *asked {
	m.mu.Lock()
	n := len(m.calls)
	m.mu.Unlock()
	if n == 0 {
		return nil
	}
	k := askedKey{client, callKey(tool, input)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.calls[k]; r != nil && now.Before(r.expires) {
		return r
	}
	return nil
}

// invocation returns the invocation id the retries of rec's call use.
func (m *retries) invocation(rec *asked) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return rec.invocationID
}

// renew gives the retries of rec's call a new invocation id, id: the one
// they used settled without executing (a mismatch).
func (m *retries) renew(rec *asked, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec.invocationID = id
}

// settled records that a retry of rec's own call settled: an identical
// call later is a new request, and rec is kept until until, for a
// duplicate retry by confirmation id to replay the result.
func (m *retries) settled(rec *asked, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if until.After(rec.expires) {
		rec.expires = until
	}
	if k := (askedKey{rec.client, rec.key}); m.calls[k] == rec {
		delete(m.calls, k)
	}
}

// remember records that the call of tool name with input, made as inv,
// was answered CONFIRMATION_REQUIRED res.
func (ts *Toolset) remember(client, name string, input json.RawMessage, inv Invocation, kind Kind, res Result) {
	cid := res.Error.ConfirmationID()
	if cid == "" {
		return
	}
	now := ts.r.now()
	ts.asked.add(&asked{
		client: client, tool: name, key: callKey(name, input), confirmationID: cid,
		target: inv, input: kind != KindObservation, invocationID: res.InvocationID,
		expires: now.Add(ts.r.opts.Limits.ConfirmationTTL),
	}, now)
}

// retry makes a call (two-phase, RememberConfirmations) that presents a
// confirmation its client was asked for: the one whose id it sends, or,
// when it sends neither a confirmation id nor a tool-call id, the one
// asked for the same call. ok is false when it presents none it was
// asked for (the catalog then makes the call, with the id it sends if
// any), or when the confirmation no longer applies to a repeated call
// (mismatch, consumed, expired: the call is a new request).
func (ts *Toolset) retry(ctx context.Context, name string, input json.RawMessage, opts CallOptions) (res Result, ok bool) {
	now := ts.r.now()
	if cid := opts.ConfirmationID; cid != "" {
		rec := ts.asked.byID(opts.Client, cid, now)
		if rec == nil || rec.tool != name {
			return Result{}, false
		}
		id := opts.ToolCallID
		switch {
		case id != "":
		case rec.key == callKey(name, input): // the same call: its retry is idempotent
			id = ts.asked.invocation(rec)
		default: // another call: the registry judges the evidence
			id = ts.newID()
		}
		return ts.present(ctx, rec, input, id), true
	}
	if opts.ToolCallID != "" {
		return Result{}, false
	}
	rec := ts.asked.byCall(opts.Client, name, input, now)
	if rec == nil {
		return Result{}, false
	}
	res = ts.present(ctx, rec, input, ts.asked.invocation(rec))
	if e := res.Error; e != nil && e.Code == CodeConfirmationInvalid && e.Reason() != ReasonDenied {
		return Result{}, false
	}
	return res, true // executed, failed, still pending, or denied: the agent must learn it
}

// present presents rec's confirmation with input under invocation id id.
// A retry of the asking call (id is its) that settles ends what rec does
// for repeated calls; one that found the input changed (a mismatch)
// leaves the approval standing, and the next retry is judged on its
// input then, under an id of its own.
func (ts *Toolset) present(ctx context.Context, rec *asked, input json.RawMessage, id string) Result {
	inv := presenting(rec.target, rec.confirmationID, id)
	inv.Input = nil
	if rec.input {
		inv.Input = input
	}
	same := id == ts.asked.invocation(rec)
	res := ts.r.Invoke(ctx, inv, InvokeOptions{Consumer: ts.opts.Consumer, Client: rec.client})
	if !same {
		return res
	}
	switch e := res.Error; {
	case e != nil && e.Code == CodeConfirmationInvalid && e.Reason() == ReasonMismatch:
		ts.asked.renew(rec, ts.newID())
	case e == nil || e.Code != CodeConfirmationRequired:
		ts.asked.settled(rec, ts.r.now().Add(ts.r.opts.Limits.DedupeCacheTTL))
	}
	return res
}

// callKey identifies a call: the tool and its canonical arguments, absent
// and null being the empty object, as the registry takes them for object
// schemas. Arguments that are not JSON are kept as they are.
func callKey(tool string, input json.RawMessage) string {
	t := bytes.TrimSpace(input)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return tool + "\x00{}"
	}
	c, err := canonical.Canonicalize(t)
	if err != nil {
		return tool + "\x00\x00" + string(t)
	}
	return tool + "\x00" + string(c)
}
