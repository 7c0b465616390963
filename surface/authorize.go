package surface

import (
	"context"
	"fmt"
)

// bindCall begins phase 4: it makes what handlers and policies see of the
// resolved call, with the host context the consumer view v read (once
// per call). The discovery hooks have run already: resolution asked them
// whether the consumer sees the capability (DESIGN decisions 2 and 19).
func (a *attempt) bindCall(v *consumerView) {
	a.call.CapabilityID, a.call.RegistrationID, a.call.Host = a.cap.id, a.reg.id, v.hostContext()
	if len(a.cap.chain) > 0 {
		a.pc = v.policyContext()
		a.pc.fill(a.reg, a.cap)
	}
}

// authorize ends phase 4: the authorize hooks, outermost first, around
// phases 5 to 9.
func (r *Registry) authorize(ctx context.Context, a *attempt) Result {
	if !a.cap.authorizes {
		return r.afterAuthorization(ctx, a)
	}
	hook := func(p *Policy) func(context.Context, *PolicyContext, Next) Result { return p.Authorize }
	return onion(r, a.inv.CapabilityID, ctx, a.cap.chain, hook, a.pc, func(ctx context.Context) Result { return r.afterAuthorization(ctx, a) })
}

// invokePolicies is phase 6: the invoke hooks, outermost first, around
// the confirmation gate and phases 7 to 9. They see the validated
// effective input; observations take none, so theirs see {}.
func (r *Registry) invokePolicies(ctx context.Context, a *attempt) Result {
	if !a.cap.invokes {
		return r.afterInvokePolicies(ctx, a)
	}
	value := a.eff.value
	if a.cap.def.kind == KindObservation {
		value = map[string]any{}
	}
	ic := &InvokeContext{PolicyContext: *a.pc, InvocationID: a.id(), Input: value}
	hook := func(p *Policy) func(context.Context, *InvokeContext, Next) Result { return p.Invoke }
	return onion(r, a.inv.CapabilityID, ctx, a.cap.chain, hook, ic, func(ctx context.Context) Result { return r.afterInvokePolicies(ctx, a) })
}

// onion runs the hooks of chain selected by hook around inner, outermost
// first (index 0); policies without the hook are skipped.
func onion[C any](r *Registry, capID string, ctx context.Context, chain []Policy, hook func(*Policy) func(context.Context, C, Next) Result, c C, inner Next) Result {
	o := &onionRun[C]{r: r, capID: capID, chain: chain, hook: hook, c: c, inner: inner}
	return o.from(ctx, 0)
}

// onionRun is one traversal of a policy chain.
type onionRun[C any] struct {
	r     *Registry
	capID string
	chain []Policy
	hook  func(*Policy) func(context.Context, C, Next) Result
	c     C
	inner Next
}

// from runs the first hooked policy at or after index i, or inner. A hook
// that panics, calls next twice or late, fails with an unknown code or
// returns without calling next or failing settles EXECUTION_FAILED.
func (o *onionRun[C]) from(ctx context.Context, i int) (res Result) {
	for i < len(o.chain) && o.hook(&o.chain[i]) == nil {
		i++
	}
	if i == len(o.chain) {
		return o.inner(ctx)
	}
	r, name := o.r, o.chain[i].Name
	called, returned := 0, false
	next := func(ctx context.Context) Result {
		if called++; called > 1 || returned {
			r.opts.Logger.Error("surface: policy called next twice or after returning", "policy", name, "capabilityId", o.capID)
			return Fail(handlerError())
		}
		return o.from(ctx, i+1)
	}
	defer func() {
		returned = true
		if rec := recover(); rec != nil {
			r.opts.Logger.Error("surface: policy panicked", "policy", name, "capabilityId", o.capID, "panic", fmt.Sprint(rec))
			res = Fail(handlerError())
		}
	}()
	res = o.hook(&o.chain[i])(ctx, o.c, next)
	switch {
	case res.Error != nil:
		e := wellFormed(res.Error)
		if e == nil {
			r.opts.Logger.Error("surface: policy failed with an unknown code", "policy", name, "code", res.Error.Code)
			e = handlerError()
		}
		res = Fail(e)
	case called == 0:
		r.opts.Logger.Error("surface: policy returned without calling next or failing", "policy", name, "capabilityId", o.capID)
		res = Fail(handlerError())
	default:
		res.Status = StatusOK
	}
	return res
}
