package surface

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// confirmModel is the confirmation store of semantics §13.2 (with the
// reservation of DESIGN decision 10) written plainly.
type confirmModel struct {
	maxPending  int
	perConsumer int // pending records one consumer may hold
	keep        int // resolved records kept
	ttl         time.Duration
	records     []*modelConfirm // creation order; trimmed ones removed
}

type modelConfirm struct {
	id       string
	digest   string
	consumer string
	state    confirmState
	expires  time.Time
}

func (m *confirmModel) find(id string) *modelConfirm {
	for _, c := range m.records {
		if c.id == id {
			return c
		}
	}
	return nil
}

func (m *confirmModel) pending() int { return m.pendingOf("") }

// pendingOf counts the pending records of consumer, or of all when "".
func (m *confirmModel) pendingOf(consumer string) int {
	n := 0
	for _, c := range m.records {
		if c.state == cPending && (consumer == "" || c.consumer == consumer) {
			n++
		}
	}
	return n
}

// request returns the pending record of digest, or "" and whether it
// overflows the store or the consumer's share (else the caller creates
// one).
func (m *confirmModel) request(digest, consumer string) (existing string, full bool) {
	for _, c := range m.records {
		if c.state == cPending && c.digest == digest {
			return c.id, false
		}
	}
	return "", m.pending() >= m.maxPending || m.pendingOf(consumer) >= m.perConsumer
}

// leave moves a pending record to state and drops the oldest resolved
// records beyond maxResolvedConfirmations.
func (m *confirmModel) leave(c *modelConfirm, state confirmState, now time.Time) {
	c.state = state
	if state == cExpired {
		c.expires = now
	}
	for len(m.records)-m.pending() > m.keep {
		i := slices.IndexFunc(m.records, func(x *modelConfirm) bool { return x.state != cPending })
		m.records = slices.Delete(m.records, i, i+1)
	}
}

// reserve answers evidence id for digest: "" (reserved), "pending" (still
// pending and matching) or the CONFIRMATION_INVALID reason.
func (m *confirmModel) reserve(id, digest string, now time.Time) string {
	c := m.find(id)
	switch {
	case c == nil:
		return "mismatch"
	case c.state == cPending && c.digest == digest:
		return "pending"
	case c.state == cPending:
		return "mismatch"
	case c.state == cDenied:
		return "denied"
	case c.state == cExpired:
		return "expired"
	case c.state == cConsumed || c.state == cReserved:
		return "consumed"
	case !now.Before(c.expires):
		c.state = cExpired
		return "expired"
	case c.digest != digest:
		return "mismatch"
	}
	c.state = cReserved
	return ""
}

// AS-IDENT-006, AS-CONFIRM-005: property — the confirmation store answers
// requests (the same pending dialog for the same digest, RATE_LIMITED when
// the pending store or the consumer's share of it is full), resolutions, expiries and presented evidence
// (reserved, still pending, or invalid with its reason) exactly as the
// plain model of semantics §13.2 does, keeping a bounded number of
// resolved records (the oldest go first), whatever the interleaving and
// the clock.
func TestConfirmationStoreMatchesModel_AS_IDENT_006(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		now := time.Unix(1_000_000, 0)
		r := New(&Options{Now: func() time.Time { return now }, Limits: Limits{
			MaxPendingConfirmations:            rapid.IntRange(1, 4).Draw(rt, "maxPending"),
			MaxPendingConfirmationsPerConsumer: rapid.IntRange(1, 4).Draw(rt, "maxPendingPerConsumer"),
			ConfirmationTTL:                    time.Hour, // the expiry timers never fire here
		}})
		defer r.Close()
		c := &r.confirm
		c.keep = rapid.IntRange(1, 6).Draw(rt, "keepResolved") // 200 in production
		m := confirmModel{maxPending: r.Limits().MaxPendingConfirmations, perConsumer: r.Limits().MaxPendingConfirmationsPerConsumer,
			keep: c.keep, ttl: r.Limits().ConfirmationTTL}
		var ids []string // every id issued, trimmed ones included
		digests := []string{"d0", "d1", "d2", "d3", "d4", "d5"}
		reserved := map[string]*confirmRecord{}
		for step := range rapid.IntRange(1, 600).Draw(rt, "steps") {
			anyID := func() string {
				if len(ids) == 0 || rapid.IntRange(0, 9).Draw(rt, "unknown") == 0 {
					return "cnf_unknown" + strconv.Itoa(step)
				}
				return rapid.SampledFrom(ids).Draw(rt, "id")
			}
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 2: // an invocation asks for confirmation
				d := rapid.SampledFrom(digests).Draw(rt, "digest")
				consumer := "test:a" // a digest names its consumer
				if d >= "d3" {
					consumer = "test:b"
				}
				existing, full := m.request(d, consumer)
				view, e := c.request(PendingConfirmation{CapabilityID: "view:t.c.a", ConsumerKey: consumer}, AuditLevelMetadata, d)
				switch {
				case existing != "":
					if e != nil || view.ConfirmationID != existing {
						rt.Fatalf("step %d: request %s = %s, %v; want the pending %s", step, d, view.ConfirmationID, e, existing)
					}
				case full:
					if e == nil || e.Code != CodeRateLimited {
						rt.Fatalf("step %d: request %s with the store full = %s, %v", step, d, view.ConfirmationID, e)
					}
				default:
					if e != nil || slices.Contains(ids, view.ConfirmationID) {
						rt.Fatalf("step %d: request %s = %s, %v; want a new record", step, d, view.ConfirmationID, e)
					}
					if !view.ExpiresAt.Equal(now.Add(m.ttl)) {
						rt.Fatalf("step %d: expiresAt %v, want %v", step, view.ExpiresAt, now.Add(m.ttl))
					}
					ids = append(ids, view.ConfirmationID)
					m.records = append(m.records, &modelConfirm{id: view.ConfirmationID, digest: d, consumer: consumer, expires: view.ExpiresAt})
				}
			case op <= 4: // the user approves, denies, or it expires
				id := anyID()
				mc := m.find(id)
				ok := mc != nil && mc.state == cPending
				var got bool
				switch kind := rapid.IntRange(0, 2).Draw(rt, "resolution"); kind {
				case 0:
					got = c.Resolve(id, Resolution{Approved: true})
					if ok {
						m.leave(mc, cApproved, now)
					}
				case 1:
					got = c.Resolve(id, Resolution{})
					if ok {
						m.leave(mc, cDenied, now)
					}
				default:
					got = c.Expire(id)
					if ok {
						m.leave(mc, cExpired, now)
					}
				}
				if got != ok {
					rt.Fatalf("step %d: resolving %s reported %v, model %v", step, id, got, ok)
				}
			case op <= 7: // an invocation presents evidence
				id, d := anyID(), rapid.SampledFrom(digests).Draw(rt, "digest")
				want := m.reserve(id, d, now)
				rec, pending, e := c.reserve(id, d)
				got := ""
				switch {
				case e != nil:
					if e.Code != CodeConfirmationInvalid {
						rt.Fatalf("step %d: evidence %s failed %s", step, id, e.Code)
					}
					got, _ = e.Details["reason"].(string)
				case pending != nil:
					got = "pending"
				case rec == nil:
					rt.Fatalf("step %d: evidence %s: no record, no error", step, id)
				}
				if got != want {
					rt.Fatalf("step %d: evidence %s for %s = %q, model %q", step, id, d, got, want)
				}
				if rec != nil {
					reserved[id] = rec
				}
			case op == 8 && len(reserved) > 0: // a reserved call executes, or fails before
				id := rapid.SampledFrom(slices.Sorted(maps.Keys(reserved))).Draw(rt, "reserved")
				rec := reserved[id]
				delete(reserved, id)
				mc := m.find(id)
				if rapid.Bool().Draw(rt, "executes") {
					c.consume(context.Background(), rec, "inv_test")
					if mc != nil {
						mc.state = cConsumed
					}
				} else {
					c.unreserve(rec)
					if mc != nil {
						mc.state = cApproved
					}
				}
			default: // time passes
				now = now.Add(time.Duration(rapid.IntRange(0, 4).Draw(rt, "quarters")) * 15 * time.Minute) // often exactly at an expiry
			}
			if c.pending != m.pending() || len(c.order) != len(m.records) {
				rt.Fatalf("step %d: store holds %d records (%d pending), model %d (%d)", step, len(c.order), c.pending, len(m.records), m.pending())
			}
		}
	})
}
