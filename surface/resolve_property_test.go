package surface_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
)

// Resolution among many instances, against a model of semantics §9 that
// the test keeps itself: candidates sorted by instance id (ties, which
// only procedure references bound to one context have, by registration
// id), the consumer's hidden ones dropped first, then the staleness
// table. The surfaces are larger than the visibility property's, with
// long runs of candidates hidden from a consumer, so that the first
// candidate a stale call names is found past many it cannot see.

// rowSpec is a generated "row" component: its instance, which consumers a
// component policy hides it from, whether its chain has a Discover hook
// that exposes it, and which of the action open and the reference to
// domain:rows.freeze (bound to the context instance ctx) it has.
type rowSpec struct {
	instance string
	hideFrom []string
	watched  bool
	open     bool
	proc     bool
	ctx      string
	token    string // what its handlers return
	id       string // its registration id, once registered
	h        *surface.Handle
}

func (s *rowSpec) hidden(consumer string) bool { return slices.Contains(s.hideFrom, consumer) }

// has reports whether the row has the capability capID.
func (s *rowSpec) has(capID string) bool {
	switch capID {
	case rowOpen:
		return s.open
	case rowFreeze:
		return s.proc
	}
	return false
}

// instanceFor is what the row is a candidate of capID for: its own
// instance for the action, its context's for the reference.
func (s *rowSpec) instanceFor(capID string) string {
	if capID == rowFreeze {
		return s.ctx
	}
	return s.instance
}

const (
	rowOpen   = "view:row.open"
	rowFreeze = "domain:rows.freeze"
)

type rowRef struct {
	Ref string `json:"ref"`
}

func (s *rowSpec) component() surface.Component {
	c := surface.Component{Type: "row", InstanceID: s.instance, Description: "Row " + s.instance,
		Actions: map[string]surface.Capability{}}
	if len(s.hideFrom) > 0 || s.watched {
		hide := slices.Clone(s.hideFrom)
		c.Policies = []surface.Policy{{Name: "rows", Discover: func(pc *surface.PolicyContext) surface.Decision {
			if slices.Contains(hide, pc.Consumer.ID) {
				return surface.Hide()
			}
			return surface.Expose()
		}}}
	}
	token := s.token
	if s.open {
		c.Actions["open"] = surface.Action(surface.ActionDef[surface.None, rowRef]{Description: "Opens the row", Effect: surface.EffectLocalState,
			Execute: func(context.Context, *surface.Call, surface.None) (rowRef, error) { return rowRef{token}, nil }})
	}
	if s.proc {
		c.Procedures = []surface.Capability{surface.Procedure(surface.ProcedureDef[rowRef, rowRef]{
			ID: rowFreeze, Description: "Freezes the row", Effect: surface.EffectServerQuery,
			Bound: []string{"ref"}, Bind: func(context.Context) (map[string]any, error) { return map[string]any{"ref": token}, nil },
			Context: &surface.Parent{Type: "row", InstanceID: s.ctx},
		})}
	}
	return c
}

// rowsRegistry returns a registry of rows that replaces duplicates, keeps
// every tombstone, and runs an executor returning the bound ref; with
// watch, a registry policy with a Discover hook exposes everything, so
// that every candidate is judged by a hook.
func rowsRegistry(tb testing.TB, now func() time.Time, watch bool) *surface.Registry {
	opts := &surface.Options{Now: now, OnDuplicate: surface.DuplicateReplace, Limits: surface.Limits{TombstoneSize: 1 << 20}}
	if watch {
		opts.Policies = []surface.Policy{{Name: "watch", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Expose() }}}
	}
	reg := surface.New(opts)
	x := surface.NewFuncExecutor()
	surface.AddFunc(x, "rows.freeze", func(_ context.Context, _ *surface.ProcedureCall, in rowRef) (rowRef, error) { return in, nil })
	reg.SetProcedureExecutor(x)
	return reg
}

// rowModel is what the test knows of the registry: every registration
// it made, live or not.
type rowModel struct {
	all  []*rowSpec
	live map[string]*rowSpec // by instance
}

// want is the model's answer to a request of consumer c: the token of
// the row it resolves to, or the error it must fail with (its code and
// the details resolution decides).
func (m *rowModel) want(c string, inv surface.Invocation) (token string, code surface.Code, details map[string]any) {
	var cands []*rowSpec // the candidates c sees, in order
	for _, s := range m.live {
		if s.has(inv.CapabilityID) && (inv.InstanceID == "" || s.instanceFor(inv.CapabilityID) == inv.InstanceID) && !s.hidden(c) {
			cands = append(cands, s)
		}
	}
	slices.SortFunc(cands, func(x, y *rowSpec) int {
		return cmp.Or(strings.Compare(x.instanceFor(inv.CapabilityID), y.instanceFor(inv.CapabilityID)), strings.Compare(x.id, y.id))
	})
	// could see: a registration c would discover were it live.
	couldSee := func(s *rowSpec) bool { return !s.open && !s.proc || !s.hidden(c) }
	if inv.RegistrationID != "" {
		for _, s := range cands {
			if s.id == inv.RegistrationID {
				return s.token, "", nil
			}
		}
		tomb := false
		for _, s := range m.all {
			tomb = tomb || s.id == inv.RegistrationID && m.live[s.instance] != s && couldSee(s)
		}
		switch {
		case tomb && len(cands) > 0:
			return "", surface.CodeStaleCapability, map[string]any{"reason": "registration-replaced", "liveRegistrationId": cands[0].id}
		case tomb:
			return "", surface.CodeComponentUnmounted, map[string]any{"phase": "resolve"}
		case len(cands) > 0:
			return "", surface.CodeStaleCapability, map[string]any{"reason": "surface-reloaded", "liveRegistrationId": cands[0].id}
		}
		return "", surface.CodeCapabilityNotFound, nil
	}
	switch len(cands) {
	case 0:
		for _, s := range m.all {
			if m.live[s.instance] != s && s.has(inv.CapabilityID) && !s.hidden(c) {
				return "", surface.CodeComponentUnmounted, map[string]any{"phase": "resolve"}
			}
		}
		return "", surface.CodeCapabilityNotFound, nil
	case 1:
		return cands[0].token, "", nil
	}
	var refs []surface.InstanceRef
	for _, s := range cands {
		ref := surface.InstanceRef{InstanceID: s.instanceFor(inv.CapabilityID), RegistrationID: s.id}
		if inv.CapabilityID == rowFreeze {
			ref.Context = &surface.Parent{Type: "row", InstanceID: s.ctx}
		} else {
			ref.Description = "Row " + s.instance
		}
		refs = append(refs, ref)
	}
	return "", surface.CodeAmbiguousInstance, map[string]any{"instances": refs}
}

// TestResolutionAmongManyInstances_AS_STALE_001: property — among up to
// 80 instances, with long runs hidden from a consumer, every request
// resolves, fails ambiguous, stale, unmounted or not found exactly as
// semantics §9 says over the candidates the consumer sees, and a stale
// call names the first of them by instance id. AS-STALE-001,
// AS-POLICY-003.
func TestResolutionAmongManyInstances_AS_STALE_001(t *testing.T) {
	consumers := []string{"ca", "cb", "cc"}
	rapid.Check(t, func(rt *rapid.T) {
		clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		reg := rowsRegistry(t, func() time.Time { return clock }, rapid.Bool().Draw(rt, "watch"))
		defer reg.Close()
		m := &rowModel{live: map[string]*rowSpec{}}
		hideShare := rapid.IntRange(0, 10).Draw(rt, "hideShare") // of 10: how often a row is hidden from a consumer
		ctxs := []string{"a", "b", "c"}
		register := func() {
			s := &rowSpec{
				instance: "r" + strconv.Itoa(rapid.IntRange(0, 79).Draw(rt, "instance")),
				watched:  rapid.Bool().Draw(rt, "watched"),
				open:     rapid.IntRange(0, 4).Draw(rt, "open") > 0,
				proc:     rapid.IntRange(0, 2).Draw(rt, "proc") > 0,
				ctx:      rapid.SampledFrom(ctxs).Draw(rt, "ctx"),
				token:    "t" + strconv.Itoa(len(m.all)),
			}
			for _, c := range consumers {
				if rapid.IntRange(0, 9).Draw(rt, "hide") < hideShare {
					s.hideFrom = append(s.hideFrom, c)
				}
			}
			h, err := reg.Register(s.component())
			if err != nil || h.Status() != surface.HandleActive {
				rt.Fatalf("register %+v: %v", s, err)
			}
			s.id, s.h = h.ID(), h
			m.all = append(m.all, s)
			m.live[s.instance] = s // a duplicate is replaced
			ctxs = append(ctxs, s.instance)
		}
		for range rapid.IntRange(1, 120).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op <= 2 || len(m.all) == 0:
				for range rapid.IntRange(1, 20).Draw(rt, "burst") {
					register()
				}
			case op == 3 && len(m.live) > 0:
				instances := slices.Sorted(func(yield func(string) bool) {
					for k := range m.live {
						if !yield(k) {
							return
						}
					}
				})
				k := rapid.SampledFrom(instances).Draw(rt, "unregister")
				m.live[k].h.Unregister()
				delete(m.live, k)
			default:
				c := rapid.SampledFrom(consumers).Draw(rt, "consumer")
				inv := surface.Invocation{CapabilityID: rapid.SampledFrom([]string{rowOpen, rowFreeze, "view:row.nothing"}).Draw(rt, "capabilityId")}
				if rapid.IntRange(0, 2).Draw(rt, "withInstance") == 0 {
					inv.InstanceID = rapid.SampledFrom(ctxs).Draw(rt, "instanceId")
				}
				if rapid.IntRange(0, 3).Draw(rt, "withRegistration") > 0 {
					inv.RegistrationID = "reg_00zzAAAAAA" // never issued
					if rapid.IntRange(0, 5).Draw(rt, "issued") > 0 {
						inv.RegistrationID = rapid.SampledFrom(m.all).Draw(rt, "registration").id
					}
				}
				res := reg.Invoke(context.Background(), inv, surface.InvokeOptions{Consumer: surface.Consumer{ID: c, Kind: surface.ConsumerTest}})
				token, code, details := m.want(c, inv)
				if code == "" {
					var out rowRef
					if err := res.Decode(&out); err != nil || out.Ref != token {
						rt.Fatalf("consumer %s, %+v: got %+v (%v), want the row %s", c, inv, res, err, token)
					}
					continue
				}
				if res.Error == nil || res.Error.Code != code {
					rt.Fatalf("consumer %s, %+v: got %+v, want %s %v", c, inv, res, code, details)
				}
				got, _ := json.Marshal(res.Error.Details)
				want, _ := json.Marshal(details)
				if code != surface.CodeAmbiguousInstance && details == nil {
					want = []byte("null")
				}
				if string(got) != string(want) {
					rt.Fatalf("consumer %s, %+v: %s details\n got  %s\n want %s", c, inv, code, got, want)
				}
			}
		}
	})
}

// TestStaleCallUnderChurn_AS_POLICY_003: a stale call racing
// registrations and unregistrations, among more rows hidden from its
// consumer than resolution judges at a time, is pointed only to rows the
// consumer sees. Run it under -race. AS-POLICY-003, AS-STALE-001.
func TestStaleCallUnderChurn_AS_POLICY_003(t *testing.T) {
	reg := rowsRegistry(t, nil, false)
	defer reg.Close()
	row := func(i int, hidden bool) *rowSpec {
		s := &rowSpec{instance: fmt.Sprintf("r%03d", i), open: true, proc: true, ctx: "a", watched: true}
		if hidden {
			s.hideFrom = []string{"ca"}
		}
		return s
	}
	var mu sync.Mutex
	hiddenIDs := map[string]bool{}
	mount := func(s *rowSpec) *surface.Handle {
		h, err := reg.Register(s.component())
		if err != nil {
			t.Error(err)
			return nil
		}
		if s.hidden("ca") {
			mu.Lock()
			hiddenIDs[h.ID()] = true
			mu.Unlock()
		}
		return h
	}
	// Rows 0–149 hidden, 500 seen: a stale call judges past 150 at first.
	for i := range 150 {
		mount(row(i, true))
	}
	last := mount(row(500, false)) // after every churned row

	stale := mount(row(200, false))
	staleID := stale.ID()
	stale.Unregister()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { // churn: rows come and go ahead of and among the hidden ones
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			h := mount(row(i%150, i%3 != 0))
			if i%2 == 0 && h != nil {
				h.Unregister()
			}
		}
	})
	var named []string
	var failed *surface.Result
calls:
	for range 300 {
		for _, capID := range []string{rowOpen, rowFreeze} {
			res := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: capID, RegistrationID: staleID},
				surface.InvokeOptions{Consumer: surface.Consumer{ID: "ca", Kind: surface.ConsumerTest}})
			if res.Error == nil || res.Error.Code != surface.CodeStaleCapability {
				failed = &res
				break calls
			}
			id, _ := res.Error.Details["liveRegistrationId"].(string)
			named = append(named, id)
		}
	}
	close(stop)
	wg.Wait()
	if failed != nil {
		t.Fatalf("a stale call: %+v", *failed)
	}
	for _, id := range named {
		if id == "" || hiddenIDs[id] {
			t.Fatalf("a stale call was pointed to %q, hidden from its consumer (the last seen row is %s)", id, last.ID())
		}
	}
}
