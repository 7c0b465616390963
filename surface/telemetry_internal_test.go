package surface

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Telemetry hooks are never called while the registry holds a lock: every
// hook finds the registry's lock, the confirmation store's, the
// observation pool's and the action queue's free. AS-EVT-001.
func TestTelemetryCalledWithoutLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r *Registry
		var mu sync.Mutex // of calls
		calls := map[string]int{}
		free := func(hook string) {
			mu.Lock()
			calls[hook]++
			mu.Unlock()
			if !freeSoon(&r.mu) {
				t.Errorf("%s: called with the registry locked", hook)
			}
			for name, mu := range map[string]tryLocker{"confirmations": &r.confirm.mu, "observation pool": &r.obs.mu} {
				if !freeSoon(mu) {
					t.Errorf("%s: called with the %s lock held", hook, name)
				}
			}
			r.mu.RLock() // and the registry can be read from the hook
			r.mu.RUnlock()
		}
		var groups []*queueGroup
		rec := &lockCheck{free: func(hook string) {
			free(hook)
			for _, g := range groups {
				if !freeSoon(&g.mu) {
					t.Errorf("%s: called with an action queue locked", hook)
				}
			}
		}}
		r = New(&Options{Telemetry: &Telemetry{
			Invocation: func(ctx context.Context, _ InvocationInfo) (context.Context, InvocationRecorder) {
				free("Invocation")
				return ctx, rec
			},
			Confirmation:  func(ConfirmationChange) { free("Confirmation") },
			Registrations: func(RegistrationChange) { free("Registrations") },
		}})
		release := make(chan struct{})
		blocking := true
		type in struct {
			N int `json:"n"`
		}
		h, err := r.Register(Component{Type: "lock.check", InstanceID: "a", Description: "Lock check", Actions: map[string]Capability{
			"run": Action(ActionDef[in, None]{Description: "Run", Effect: EffectLocalState, Execute: func(context.Context, *Call, in) (None, error) {
				if blocking {
					blocking = false
					<-release
				}
				return None{}, nil
			}}),
			"wipe": Action(ActionDef[in, None]{Description: "Wipe", Effect: EffectLocalState, Confirmation: ConfirmRequired,
				Execute: func(context.Context, *Call, in) (None, error) { return None{}, nil }}),
		}})
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, &h.reg.actions)
		call := func(capID, cid string) Result {
			return r.Invoke(context.Background(), Invocation{CapabilityID: capID, RegistrationID: h.ID(), Input: json.RawMessage(`{"n":1}`), ConfirmationID: cid}, InvokeOptions{})
		}
		done := make(chan Result, 1)
		go func() { done <- call("view:lock.check.run", "") }()
		synctest.Wait()
		go func() { time.Sleep(time.Second); close(release) }()
		if res := call("view:lock.check.run", ""); res.Error != nil { // queued behind the first
			t.Fatal(res.Error)
		}
		<-done
		res := call("view:lock.check.wipe", "")
		cid, _ := res.Error.Details["confirmationId"].(string)
		r.Confirmations().Resolve(cid, Resolution{Approved: true})
		if res := call("view:lock.check.wipe", cid); res.Error != nil {
			t.Fatal(res.Error)
		}
		h.Unregister()
		r.Register(Component{Type: "lock.other", Description: "Other", Observations: map[string]Capability{
			"read": Observation(ObservationDef[in]{Description: "Read", Read: func(context.Context, *Call) (in, error) { return in{}, nil }})}})
		r.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, hook := range []string{"Invocation", "Phase:queued", "Phase:admitted", "Phase:executing", "Phase:confirmation-requested",
			"Phase:confirmation-presented", "Settle", "Confirmation", "Registrations"} {
			if calls[hook] == 0 {
				t.Errorf("hook %s was never called", hook)
			}
		}
	})
}

type tryLocker interface {
	TryLock() bool
	Unlock()
}

// freeSoon reports whether mu can be locked, letting the other
// goroutines run between tries: another invocation may hold it for a
// moment (settling, it hands its slot on under the queue's lock), but a
// lock the hook's own goroutine holds is never free.
func freeSoon(mu tryLocker) bool {
	for range 100_000 {
		if mu.TryLock() {
			mu.Unlock()
			return true
		}
		runtime.Gosched()
	}
	return false
}

type lockCheck struct{ free func(string) }

func (l *lockCheck) Phase(e PhaseEvent) { l.free("Phase:" + e.Phase.String()) }
func (l *lockCheck) Settle(Settlement)  { l.free("Settle") }
