package otelsurface_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsurface/agentsurface/otelsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// An ok call: the invocation span is a child of the caller's span and the
// parent of the handler's, with the capability's attributes and no error.
func TestOKCallSpanTree(t *testing.T) {
	h := newHarness(t, nil)
	reg := h.registry(t, nil)
	wh := surfacetest.MustRegister(t, reg, widget("w1", func(ctx context.Context) error {
		_, span := h.tracer().Start(ctx, "handler work")
		span.End()
		return nil
	}))
	ctx, agentSpan := h.tracer().Start(context.Background(), "agent turn")
	res := reg.Invoke(ctx, call(setID, wh.ID(), ""), agent)
	agentSpan.End()
	surfacetest.RequireOK(t, res)

	inv := h.span(t, "invoke "+setID)
	work := h.span(t, "handler work")
	turn := h.span(t, "agent turn")
	if inv.Parent.SpanID() != turn.SpanContext.SpanID() || inv.SpanContext.TraceID() != turn.SpanContext.TraceID() {
		t.Fatalf("invocation span's parent = %v, want the caller's span %v", inv.Parent.SpanID(), turn.SpanContext.SpanID())
	}
	if work.Parent.SpanID() != inv.SpanContext.SpanID() {
		t.Fatalf("handler span's parent = %v, want the invocation span %v", work.Parent.SpanID(), inv.SpanContext.SpanID())
	}
	if inv.SpanKind != trace.SpanKindInternal || inv.Status.Code != codes.Unset {
		t.Fatalf("kind %v, status %+v", inv.SpanKind, inv.Status)
	}
	requireAttrs(t, "ok span", inv.Attributes, map[string]any{
		"agentsurface.capability.id":     setID,
		"agentsurface.capability.kind":   "action",
		"agentsurface.capability.effect": "local-state",
		"agentsurface.capability.plane":  "view",
		"agentsurface.consumer.kind":     "mcp-bridge",
		"agentsurface.registration.id":   wh.ID(),
		"agentsurface.instance.id":       "w1",
		"agentsurface.invocation.id":     res.InvocationID,
		"agentsurface.result.status":     "ok",
	})
	requireNoAttrs(t, "ok span", inv.Attributes, "agentsurface.consumer.id", "agentsurface.error.code", "error.type")
	if got := eventNames(inv); !slices.Equal(got, []string{"execution.started"}) {
		t.Fatalf("events = %v", got)
	}
	if inv.InstrumentationScope.Name != otelsurface.ScopeName {
		t.Fatalf("scope = %+v", inv.InstrumentationScope)
	}
}

// A policy refusal is recorded with its code and retry, but the span is
// not an error: the agent caused it, no operator needs to act.
func TestPolicyRefusalSpan(t *testing.T) {
	h := newHarness(t, &otelsurface.Options{ConsumerID: true})
	deny := surface.Policy{Name: "deny", Authorize: func(ctx context.Context, pc *surface.PolicyContext, next surface.Next) surface.Result {
		return surface.Fail(surface.NewError(surface.CodeNotAuthorized, "", nil))
	}}
	reg := h.registry(t, &surface.Options{Policies: []surface.Policy{deny}})
	wh := surfacetest.MustRegister(t, reg, widget("w1", nil))
	res := reg.Invoke(context.Background(), call(setID, wh.ID(), ""), agent)
	e := surfacetest.RequireCode(t, res, surface.CodeNotAuthorized)

	inv := h.span(t, "invoke "+setID)
	if inv.Status.Code != codes.Unset {
		t.Fatalf("status = %+v, want unset for a refusal", inv.Status)
	}
	requireAttrs(t, "refusal", inv.Attributes, map[string]any{
		"agentsurface.result.status": "error",
		"agentsurface.error.code":    "NOT_AUTHORIZED",
		"agentsurface.error.retry":   string(e.Retry),
		"agentsurface.consumer.id":   "session-7", // opted in
	})
	requireNoAttrs(t, "refusal", inv.Attributes, "error.type")
	if len(inv.Events) != 0 || !inv.Parent.Equal(trace.SpanContext{}) {
		t.Fatalf("events %v, parent %v: a refused root call", eventNames(inv), inv.Parent)
	}
}

// A capability that names nothing gets a bounded span name; the id stays
// an attribute.
func TestNotFoundSpan(t *testing.T) {
	h := newHarness(t, nil)
	reg := h.registry(t, nil)
	for _, id := range []string{"view:nothing.here.atAll", "not a capability id"} {
		surfacetest.RequireCode(t, reg.Invoke(context.Background(), surface.Invocation{CapabilityID: id}, agent), surface.CodeCapabilityNotFound)
	}
	spans := h.spans.GetSpans()
	if len(spans) != 2 || spans[0].Name != "invoke" || spans[1].Name != "invoke" {
		t.Fatalf("spans = %v", names(spans))
	}
	requireAttrs(t, "not found", spans[0].Attributes, map[string]any{
		"agentsurface.capability.id": "view:nothing.here.atAll", "agentsurface.capability.plane": "view",
		"agentsurface.error.code": "CAPABILITY_NOT_FOUND",
	})
	requireNoAttrs(t, "malformed", spans[1].Attributes, "agentsurface.capability.plane")
}

// A timeout is an operator's error: status Error, error.type TIMEOUT, and
// the duration histogram holds the timeout. AS-CONC-011.
func TestTimeoutSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil)
		reg := h.registry(t, nil)
		wh := surfacetest.MustRegister(t, reg, widget("w1", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}))
		res := reg.Invoke(context.Background(), call(setID, wh.ID(), ""), surface.InvokeOptions{Consumer: agent.Consumer, Timeout: 2 * time.Second})
		surfacetest.RequireCode(t, res, surface.CodeTimeout)

		inv := h.span(t, "invoke "+setID)
		if inv.Status.Code != codes.Error || inv.Status.Description != "TIMEOUT" {
			t.Fatalf("status = %+v", inv.Status)
		}
		requireAttrs(t, "timeout", inv.Attributes, map[string]any{"error.type": "TIMEOUT", "agentsurface.error.code": "TIMEOUT"})
		if got := eventNames(inv); !slices.Equal(got, []string{"execution.started"}) {
			t.Fatalf("events = %v", got)
		}
		if d := inv.EndTime.Sub(inv.StartTime); d != 2*time.Second {
			t.Fatalf("span lasted %v, want 2s", d)
		}
		series := "agentsurface.capability.id=" + setID + ",agentsurface.capability.kind=action,agentsurface.consumer.kind=mcp-bridge,agentsurface.error.code=TIMEOUT,agentsurface.result.status=error"
		if p := h.metrics(t)["agentsurface.invocation.duration"][series]; p.count != 1 || p.sum != 2 {
			t.Fatalf("duration %s = %+v, want one 2s call", series, p)
		}
	})
}

// An execution failure is an operator's error too.
func TestExecutionFailedSpan(t *testing.T) {
	h := newHarness(t, nil)
	reg := h.registry(t, nil)
	wh := surfacetest.MustRegister(t, reg, widget("w1", func(context.Context) error { return errors.New("disk on fire") }))
	surfacetest.RequireCode(t, reg.Invoke(context.Background(), call(setID, wh.ID(), ""), agent), surface.CodeExecutionFailed)
	inv := h.span(t, "invoke "+setID)
	if inv.Status.Code != codes.Error || inv.Status.Description != "EXECUTION_FAILED" {
		t.Fatalf("status = %+v", inv.Status)
	}
	for _, kv := range inv.Attributes {
		if kv.Value.String() == "disk on fire" {
			t.Fatal("the cause reached the span; it belongs to the log")
		}
	}
}

// The confirmation round trip: the wait is a span of its own, a child of
// the span that asked, from the request to the decision, with the
// decision, the channel and approver the host gave and the digest's
// hash; the retry presenting the evidence links to the span that asked
// and records the human's wait; the decision latency and the pending
// count are metrics. AS-CONFIRM-003.
func TestConfirmationRoundTripLinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil)
		reg := h.registry(t, nil)
		wh := surfacetest.MustRegister(t, reg, widget("w1", nil))

		first := reg.Invoke(context.Background(), call(wipeID, wh.ID(), ""), agent)
		cid := surfacetest.RequireCode(t, first, surface.CodeConfirmationRequired).Details["confirmationId"].(string)
		pendingSeries := "agentsurface.capability.id=" + wipeID
		if p := h.metrics(t)["agentsurface.confirmations.pending"][pendingSeries]; p.value != 1 {
			t.Fatalf("pending = %+v, want 1", p)
		}

		time.Sleep(45 * time.Second) // the user reads the dialog
		if !reg.Confirmations().Resolve(cid, surface.Resolution{Approved: true, Channel: surface.ChannelURL, Approver: surface.ApproverUser}) {
			t.Fatal("resolve failed")
		}
		retry := reg.Invoke(context.Background(), call(wipeID, wh.ID(), cid), agent)
		surfacetest.RequireOK(t, retry)

		spans := h.spans.GetSpans()
		if len(spans) != 3 {
			t.Fatalf("spans = %v", names(spans))
		}
		asked, wait, presented := spans[0], spans[1], spans[2]
		if wait.Name != "confirmation "+wipeID || wait.Parent.SpanID() != asked.SpanContext.SpanID() ||
			wait.EndTime.Sub(wait.StartTime) != 45*time.Second {
			t.Fatalf("wait span %s, parent %v (asked %v), %v long", wait.Name, wait.Parent.SpanID(), asked.SpanContext.SpanID(), wait.EndTime.Sub(wait.StartTime))
		}
		requireAttrs(t, "wait span", wait.Attributes, map[string]any{
			"agentsurface.confirmation.id": cid, "agentsurface.confirmation.decision": "approved",
			"agentsurface.confirmation.channel": "url", "agentsurface.confirmation.approver": "user",
		})
		digest, _ := attrs(wait.Attributes)["agentsurface.confirmation.digest"].(string)
		if len(digest) != 64 || strings.Contains(digest, "{") {
			t.Fatalf("digest attribute %q: want the hex SHA-256, never the input", digest)
		}
		requireNoAttrs(t, "wait span", wait.Attributes, "agentsurface.grant.id")
		if asked.Status.Code != codes.Unset {
			t.Fatalf("asking span status = %+v: CONFIRMATION_REQUIRED is no failure", asked.Status)
		}
		if got := eventNames(asked); !slices.Equal(got, []string{"confirmation.requested"}) {
			t.Fatalf("asking span events = %v", got)
		}
		requireAttrs(t, "requested event", asked.Events[0].Attributes, map[string]any{"agentsurface.confirmation.id": cid})
		requireAttrs(t, "asking span", asked.Attributes, map[string]any{"agentsurface.error.code": "CONFIRMATION_REQUIRED", "agentsurface.confirmation.id": cid})

		if len(presented.Links) != 1 || !presented.Links[0].SpanContext.Equal(asked.SpanContext) {
			t.Fatalf("retry links = %+v, want the asking span %v", presented.Links, asked.SpanContext)
		}
		requireAttrs(t, "link", presented.Links[0].Attributes, map[string]any{"agentsurface.confirmation.id": cid})
		requireAttrs(t, "retry span", presented.Attributes, map[string]any{
			"agentsurface.confirmation.id": cid, "agentsurface.confirmation.wait": 45.0, "agentsurface.result.status": "ok",
		})
		if got := eventNames(presented); !slices.Equal(got, []string{"confirmation.presented", "execution.started"}) {
			t.Fatalf("retry span events = %v", got)
		}
		requireAttrs(t, "presented event", presented.Events[0].Attributes, map[string]any{"agentsurface.confirmation.accepted": true})

		m := h.metrics(t)
		if p := m["agentsurface.confirmations.pending"][pendingSeries]; p.value != 0 {
			t.Fatalf("pending after approval = %+v", p)
		}
		decided := "agentsurface.capability.id=" + wipeID + ",agentsurface.confirmation.outcome=approved"
		if p := m["agentsurface.confirmation.decision.duration"][decided]; p.count != 1 || p.sum != 45 {
			t.Fatalf("decision latency %s = %+v, want one of 45s", decided, p)
		}
	})
}

// A call to an unmounted registration keeps the capability's span name
// and records the registration id the caller sent. AS-STALE-001.
func TestUnmountedSpan(t *testing.T) {
	h := newHarness(t, nil)
	reg := h.registry(t, nil)
	wh := surfacetest.MustRegister(t, reg, widget("w1", nil))
	wh.Unregister()
	surfacetest.RequireCode(t, reg.Invoke(context.Background(), call(setID, wh.ID(), ""), agent), surface.CodeComponentUnmounted)
	inv := h.span(t, "invoke "+setID)
	requireAttrs(t, "unmounted", inv.Attributes, map[string]any{
		"agentsurface.registration.id": wh.ID(), "agentsurface.error.code": "COMPONENT_UNMOUNTED",
	})
	requireNoAttrs(t, "unmounted", inv.Attributes, "agentsurface.capability.kind")
	series := "agentsurface.capability.id=" + setID + ",agentsurface.consumer.kind=mcp-bridge,agentsurface.error.code=COMPONENT_UNMOUNTED,agentsurface.result.status=error"
	if p := h.metrics(t)["agentsurface.invocations"][series]; p.value != 1 {
		t.Fatalf("%s = %+v", series, p)
	}
}
