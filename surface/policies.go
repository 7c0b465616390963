package surface

import (
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// truthy follows JavaScript truthiness, as host contexts from the
// reference do: nil, false, 0, NaN and "" are false.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case float64:
		return v != 0 && !math.IsNaN(v)
	case float32:
		return v != 0 && !math.IsNaN(float64(v))
	case int:
		return v != 0
	case int64:
		return v != 0
	case int32:
		return v != 0
	case uint:
		return v != 0
	case uint64:
		return v != 0
	}
	return true
}

// Authenticated hides capabilities unless the host context holds a truthy
// value under key (default "user"), and fails NOT_AUTHENTICATED at
// authorization for a policy chain that exposed them anyway.
func Authenticated(key string) Policy {
	if key == "" {
		key = "user"
	}
	return gate("authenticated", func(pc *PolicyContext) bool { return truthy(pc.Host[key]) },
		NewError(CodeNotAuthenticated, "", nil))
}

// HasPermission hides capabilities unless check(host, permission) holds,
// and fails NOT_AUTHORIZED at authorization. The agent is never told which
// permission was missing. check receives a copy of the host context.
func HasPermission(permission string, check func(host map[string]any, permission string) bool) Policy {
	return gate("has-permission("+permission+")", func(pc *PolicyContext) bool { return check(maps.Clone(pc.Host), permission) },
		NewError(CodeNotAuthorized, "", map[string]any{"origin": "client"}))
}

// TenantBoundary hides capabilities whose expected tenant (from the
// policy context, typically Internal metadata) differs from the current
// tenant of the host context; no expected tenant passes. It fails
// NOT_AUTHORIZED at authorization.
func TenantBoundary(current func(host map[string]any) string, expected func(pc *PolicyContext) string) Policy {
	return gate("tenant-boundary", func(pc *PolicyContext) bool {
		want := expected(pc)
		return want == "" || want == current(maps.Clone(pc.Host))
	}, NewError(CodeNotAuthorized, "", map[string]any{"origin": "client"}))
}

// OnlyIn exposes capabilities only in the given environments; elsewhere
// they do not exist (hidden, and CAPABILITY_NOT_FOUND at invocation).
func OnlyIn(envs ...Environment) Policy {
	envs = slices.Clone(envs)
	return gate("environment", func(pc *PolicyContext) bool { return slices.Contains(envs, pc.Environment) },
		NewError(CodeCapabilityNotFound, "", nil))
}

// gate is a policy that hides what ok refuses and, for a chain that
// exposed it anyway, fails its calls at authorization with (a copy of)
// refusal.
func gate(name string, ok func(pc *PolicyContext) bool, refusal *Error) Policy {
	return Policy{
		Name: name,
		Discover: func(pc *PolicyContext) Decision {
			if ok(pc) {
				return Expose()
			}
			return Hide()
		},
		Authorize: func(ctx context.Context, pc *PolicyContext, next Next) Result {
			if !ok(pc) {
				return Fail(refusal.clone())
			}
			return next(ctx)
		},
	}
}

// RateLimit admits at most limit calls per window for each consumer and
// capability, as a token bucket: the bucket holds limit tokens and refills
// continuously at limit per window; each admitted call takes one. A call
// finding no token fails RATE_LIMITED (reason "rate") with retryAfterMs,
// the time until the next token. Each call costs O(1). Rejected calls do
// not count; admitted calls count even if they fail later. Time comes from
// the registry clock.
func RateLimit(limit int, window time.Duration) Policy {
	if limit < 1 {
		limit = 1
	}
	if window <= 0 {
		window = time.Second
	}
	rl := &rateLimiter{
		every:   rate.Limit(float64(limit) / window.Seconds()),
		burst:   limit,
		buckets: map[bucketKey]*rate.Limiter{},
	}
	return Policy{
		Name: "rate-limit",
		Authorize: func(ctx context.Context, pc *PolicyContext, next Next) Result {
			if wait, ok := rl.take(bucketKey{pc.Consumer.Kind, pc.Consumer.ID, pc.CapabilityID}, pc.Now()); !ok {
				ms := int64(math.Ceil(float64(wait) / float64(time.Millisecond)))
				return Fail(NewError(CodeRateLimited, "", map[string]any{"reason": string(ReasonRate), "retryAfterMs": ms}))
			}
			return next(ctx)
		},
	}
}

// bucketKey is a consumer (kind and id) and a capability.
type bucketKey struct {
	kind       ConsumerKind
	consumer   string
	capability string
}

// rateLimiter keeps one token bucket per key.
type rateLimiter struct {
	every   rate.Limit // tokens per second
	burst   int
	mu      sync.Mutex
	buckets map[bucketKey]*rate.Limiter
}

// maxBuckets triggers a sweep of full buckets, so idle keys do not
// accumulate.
const maxBuckets = 4096

// take takes a token for key at now, or reports how long until one is
// available.
func (rl *rateLimiter) take(key bucketKey, now time.Time) (time.Duration, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b := rl.buckets[key]
	if b == nil {
		if len(rl.buckets) >= maxBuckets {
			// Full buckets behave exactly like new ones: forget them.
			maps.DeleteFunc(rl.buckets, func(_ bucketKey, b *rate.Limiter) bool { return b.TokensAt(now) >= float64(rl.burst) })
		}
		b = rate.NewLimiter(rl.every, rl.burst)
		rl.buckets[key] = b
	}
	if b.AllowN(now, 1) {
		return 0, true
	}
	missing := 1 - b.TokensAt(now)
	return time.Duration(math.Ceil(missing / float64(rl.every) * float64(time.Second))), false
}

// RequireConfirmation escalates the confirmation level to required: when
// cond is nil or returns true for the effective input (a panicking cond
// counts as true), the call needs the user's approval. summary, if set,
// composes what the user is asked to approve from the effective input.
//
// A standing grant ([Grants]) may skip the question a conditional
// escalation asks, where the capability allows grants. Without a
// condition, or with the option [AlwaysAsk], the policy always asks: no
// grant skips its question, whatever the capability allows (deny > ask >
// grant).
func RequireConfirmation(cond func(ic *InvokeContext) bool, summary func(input any) string, opts ...AskOption) Policy {
	esc := &escalation{when: cond, summary: summary}
	for _, o := range opts {
		if o == AlwaysAsk {
			esc.always = true
		}
	}
	return Policy{Name: "require-confirmation", escalate: esc}
}

// AskOption is an option of [RequireConfirmation].
type AskOption uint8

// AlwaysAsk makes a RequireConfirmation policy ask every call it
// escalates, even where a standing grant would let the call through: an
// administrator's "always ask" wins over any grant.
const AlwaysAsk AskOption = 1

// Audit records every invocation of the capabilities it governs to sink
// (the registry's sink when nil) at the given level (AuditLevelMetadata or
// AuditLevelFull): invocation-started before the call, with the input at full,
// and invocation-settled after it, with the output at full on ok.
func Audit(sink AuditSink, level AuditLevel) Policy {
	return Policy{
		Name: "audit",
		Invoke: func(ctx context.Context, ic *InvokeContext, next Next) Result {
			r := ic.r
			if r == nil { // a context a test made: nowhere to record
				return next(ctx)
			}
			record := func(e AuditEvent) {
				e.CapabilityID, e.RegistrationID, e.InvocationID, e.ConsumerID = ic.CapabilityID, ic.RegistrationID, ic.InvocationID, ic.Consumer.Key()
				r.auditTo(sink, e)
			}
			start := ic.Now()
			ev := AuditEvent{Type: AuditInvocationStarted}
			if level == AuditLevelFull {
				ev.Payload = r.payload(ic.CapabilityID, jsonOf(ic.Input), "")
			}
			record(ev)
			res := next(ctx)
			d := ic.Now().Sub(start).Milliseconds()
			ev = AuditEvent{Type: AuditInvocationSettled, Status: res.Status, DurationMs: &d}
			if res.Error != nil {
				ev.Code = res.Error.Code
			} else if level == AuditLevelFull && res.Output != "" {
				ev.Payload = r.payload(ic.CapabilityID, "", res.Output)
			}
			record(ev)
			return res
		},
	}
}

// jsonOf encodes a JSON value for an audit payload.
func jsonOf(v any) JSONText {
	b, err := canonical.Marshal(v)
	if err != nil {
		return ""
	}
	return JSONText(b)
}
