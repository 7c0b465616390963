package surface_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
)

// modelGrant is the test's own account of a grant: what it lets
// through, judged independently of the registry's code.
type modelGrant struct {
	id       string
	consumer string // a key or "*"
	instance string
	ids      []string // ValueIn("ids") when not nil
	lo, hi   *float64 // InRange("count")
	prefix   string   // HasPrefix("site") when not ""
	keys     []string // OnlyKeys("") when not nil
	expires  time.Time
	maxUses  int
	uses     int
	revoked  bool
}

// admits reports whether the model grant lets in through for consumer at
// instance main at now.
func (g *modelGrant) admits(consumer string, in map[string]any, now time.Time) bool {
	if g.revoked || !now.Before(g.expires) || g.maxUses > 0 && g.uses >= g.maxUses {
		return false
	}
	if g.consumer != "*" && g.consumer != consumer || g.instance != "" && g.instance != "main" {
		return false
	}
	// every element of a list, never an empty list; exact JSON types.
	each := func(v any, ok func(any) bool) bool {
		if arr, isArr := v.([]any); isArr {
			if len(arr) == 0 {
				return false
			}
			for _, e := range arr {
				if !ok(e) {
					return false
				}
			}
			return true
		}
		return ok(v)
	}
	if g.ids != nil {
		v, present := in["ids"]
		if !present || !each(v, func(e any) bool {
			s, isStr := e.(string)
			for _, id := range g.ids {
				if isStr && s == id {
					return true
				}
			}
			return false
		}) {
			return false
		}
	}
	if g.lo != nil {
		v, present := in["count"]
		if !present || !each(v, func(e any) bool { f, isNum := e.(float64); return isNum && f >= *g.lo && f <= *g.hi }) {
			return false
		}
	}
	if g.prefix != "" {
		v, present := in["site"]
		if !present || !each(v, func(e any) bool { s, isStr := e.(string); return isStr && strings.HasPrefix(s, g.prefix) }) {
			return false
		}
	}
	if g.keys != nil {
		for k := range in {
			found := false
			for _, allowed := range g.keys {
				found = found || k == allowed
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// Property (issue "standing grants", Bad input and faults): for random
// grants, revocations, clock moves and inputs, a call runs without
// asking only if its input satisfies every constraint of a live grant of
// its own consumer (or all consumers), of its instance, within its TTL
// and uses, never revoked; it is then the oldest such grant that is
// named and spent, and a call that asks spends nothing. Another
// registry's calls never run unasked. AS-CONFIRM-004.
func TestGrantProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var now atomic.Int64
		now.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
		// Every call that asks leaves a confirmation pending: room for all
		// of them, so that a run never meets RATE_LIMITED instead.
		limits := surface.Limits{MaxGrants: 1000, MaxPendingConfirmations: 200, MaxPendingConfirmationsPerConsumer: 200}
		f := newGrantFixture(t, &surface.Options{Now: clock, Limits: limits})
		f.register(t, "spare")
		other := newGrantFixture(t, &surface.Options{Now: clock, Limits: limits})
		defer f.reg.Close()
		defer other.reg.Close()

		var model []*modelGrant
		consumers := []string{"mcp-bridge:a", "mcp-bridge:b", "webmcp:a"}
		idPool := []string{"d1", "d2", "d3", "D1", "d１"}
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1: // create
				g := &modelGrant{
					consumer: rapid.SampledFrom(append([]string{"*"}, consumers...)).Draw(rt, "consumer"),
					instance: rapid.SampledFrom([]string{"", "main", "spare"}).Draw(rt, "instance"),
					maxUses:  rapid.IntRange(0, 3).Draw(rt, "maxUses"),
				}
				ttl := time.Duration(rapid.IntRange(1, 30).Draw(rt, "ttlMin")) * time.Minute
				var cs []surface.Constraint
				if rapid.Bool().Draw(rt, "hasIds") {
					g.ids = rapid.SliceOfNDistinct(rapid.SampledFrom(idPool[:3]), 1, 3, rapid.ID[string]).Draw(rt, "ids")
					vals := make([]any, len(g.ids))
					for i, id := range g.ids {
						vals[i] = id
					}
					cs = append(cs, surface.ValueIn("ids", vals...))
				}
				if rapid.Bool().Draw(rt, "hasRange") {
					lo := float64(rapid.IntRange(0, 5).Draw(rt, "lo"))
					hi := lo + float64(rapid.IntRange(0, 5).Draw(rt, "width"))
					g.lo, g.hi = &lo, &hi
					cs = append(cs, surface.InRange("count", lo, hi))
				}
				if rapid.Bool().Draw(rt, "hasPrefix") {
					g.prefix = rapid.SampledFrom([]string{"eu-", "us-"}).Draw(rt, "prefix")
					cs = append(cs, surface.HasPrefix("site", g.prefix))
				}
				if rapid.Bool().Draw(rt, "hasKeys") {
					g.keys = rapid.SliceOfDistinct(rapid.SampledFrom([]string{"ids", "count", "site", "mode"}), rapid.ID[string]).Draw(rt, "keys")
					cs = append(cs, surface.OnlyKeys("", g.keys...))
				}
				made, err := f.reg.Grants().Create(bg, surface.GrantSpec{ConsumerKey: g.consumer, CapabilityID: gWipeID,
					InstanceID: g.instance, Constraints: cs, TTL: ttl, MaxUses: g.maxUses}, "alice")
				if err != nil {
					rt.Fatalf("Create: %v", err)
				}
				g.id, g.expires = made.GrantID, clock().Add(ttl)
				model = append(model, g)
			case 2: // revoke
				if len(model) == 0 {
					continue
				}
				g := model[rapid.IntRange(0, len(model)-1).Draw(rt, "revoke")]
				// Expiry timers run on the runtime clock, which this test does
				// not move: a grant past its TTL on the registry's clock lets
				// nothing through but is still revocable.
				active := !g.revoked && (g.maxUses == 0 || g.uses < g.maxUses)
				if got := f.reg.Grants().Revoke(bg, g.id, "bob"); got != active {
					rt.Fatalf("Revoke(%s) = %v, model active %v", g.id, got, active)
				}
				g.revoked = true
			case 3: // time passes
				now.Add(int64(time.Duration(rapid.IntRange(1, 20).Draw(rt, "advanceMin")) * time.Minute))
			default: // a call
				consumer := rapid.SampledFrom(consumers).Draw(rt, "caller")
				in := map[string]any{}
				if rapid.Bool().Draw(rt, "sendIds") {
					ids := rapid.SliceOfN(rapid.SampledFrom(idPool), 0, 3).Draw(rt, "callIds")
					arr := make([]any, len(ids))
					for i, id := range ids {
						arr[i] = id
					}
					in["ids"] = arr
				}
				if rapid.Bool().Draw(rt, "sendCount") {
					in["count"] = rapid.SampledFrom([]any{float64(0), float64(3), 2.5, float64(7), "3", nil, []any{float64(1), float64(4)}}).Draw(rt, "count")
				}
				if rapid.Bool().Draw(rt, "sendSite") {
					in["site"] = rapid.SampledFrom([]string{"eu-1", "us-1", "EU-1", "eu‐1"}).Draw(rt, "site")
				}
				if rapid.Bool().Draw(rt, "sendMode") {
					in["mode"] = "replace"
				}
				b, _ := json.Marshal(in)
				kind, id, _ := strings.Cut(consumer, ":")
				opts := surface.InvokeOptions{Consumer: surface.Consumer{ID: id, Kind: surface.ConsumerKind(kind)}}
				res := f.reg.Invoke(bg, surface.Invocation{CapabilityID: gWipeID, InstanceID: "main", Input: b}, opts)
				var want *modelGrant
				for _, g := range model {
					if g.admits(consumer, in, clock()) {
						want = g
						break
					}
				}
				switch {
				case want == nil:
					if res.Error == nil || res.Error.Code != surface.CodeConfirmationRequired || res.GrantID != "" {
						rt.Fatalf("%s %s: no live grant admits it, got %+v (%v)", consumer, b, res, res.Error)
					}
				default:
					if res.Status != surface.StatusOK || res.GrantID != want.id {
						rt.Fatalf("%s %s: grant %s admits it, got %+v (%v)", consumer, b, want.id, res, res.Error)
					}
					want.uses++
				}
				// The same call in another session of the same user asks.
				if r2 := other.reg.Invoke(bg, surface.Invocation{CapabilityID: gWipeID, InstanceID: "main", Input: b}, opts); r2.GrantID != "" || r2.Error == nil {
					rt.Fatalf("another registry let %s through: %+v", b, r2)
				}
			}
		}
		// The registry's account of uses agrees with the model's.
		for _, g := range model {
			got, ok := f.reg.Grants().Get(g.id)
			if ok && got.Uses != g.uses {
				rt.Fatalf("grant %s: %d uses, model %d", g.id, got.Uses, g.uses)
			}
		}
	})
}
