package surfacetest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// In a test, the harness takes the test's *testing.T; an Example has none,
// so this one passes exampleT, a stand-in that runs the cleanups at the
// end and panics where a test would fail.
func Example() {
	t := &exampleT{}
	defer t.end()

	// The code under test registers a counter.
	var mu sync.Mutex
	count := 0
	s := surfacetest.New(t, nil) // a registry of its own, closed when the test ends
	s.Register(surface.Component{Type: "counter", Description: "A counter",
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[int]{Description: "The count",
				Read: func(context.Context, *surface.Call) (int, error) {
					mu.Lock()
					defer mu.Unlock()
					return count, nil
				}}),
		},
		Actions: map[string]surface.Capability{
			"add": surface.Action(surface.ActionDef[struct {
				N int `json:"n"`
			}, surface.None]{Description: "Adds n", Effect: surface.EffectLocalState,
				Execute: func(_ context.Context, _ *surface.Call, in struct {
					N int `json:"n"`
				}) (surface.None, error) {
					mu.Lock()
					defer mu.Unlock()
					count += in.N
					return surface.None{}, nil
				}}),
		},
	})

	// The test acts as an agent would and checks what it sees.
	surfacetest.RequireExposed(t, s, "view:counter.add", "")
	surfacetest.RequireOK(t, s.Invoke("view:counter.add", map[string]int{"n": 2}, surfacetest.InvokeOptions{}))
	surfacetest.RequireFailWith(t, s.Invoke("view:counter.add", map[string]string{"n": "two"}, surfacetest.InvokeOptions{}),
		surface.CodeInvalidInput, nil)
	fmt.Println("count:", surfacetest.ObserveAs[int](s, "view:counter.read", ""))
	for _, e := range s.Events() {
		fmt.Println("event:", e.EventType())
	}

	// A golden test would call surfacetest.RequireSnapshotGolden(t, s, "counter.json").
	fmt.Printf("%s", surfacetest.SemanticSnapshot(s.Snapshot(surface.SnapshotOptions{}), nil))
	// Output:
	// count: 2
	// event: component-registered
	// event: surface-changed
	// event: invocation-started
	// event: invocation-settled
	// event: invocation-started
	// event: invocation-settled
	// event: invocation-started
	// event: invocation-settled
	// {
	//   "components": [
	//     {
	//       "type": "counter",
	//       "instanceId": "default",
	//       "registrationId": "<reg#1>",
	//       "description": "A counter",
	//       "observations": [
	//         {
	//           "capabilityId": "view:counter.read",
	//           "name": "read",
	//           "description": "The count",
	//           "outputSchema": {
	//             "type": "integer",
	//             "minimum": -9007199254740991,
	//             "maximum": 9007199254740991
	//           },
	//           "available": true
	//         }
	//       ],
	//       "actions": [
	//         {
	//           "capabilityId": "view:counter.add",
	//           "name": "add",
	//           "description": "Adds n",
	//           "inputSchema": {
	//             "type": "object",
	//             "properties": {
	//               "n": {
	//                 "type": "integer",
	//                 "minimum": -9007199254740991,
	//                 "maximum": 9007199254740991
	//               }
	//             },
	//             "required": [
	//               "n"
	//             ],
	//             "additionalProperties": false
	//           },
	//           "effect": "local-state",
	//           "idempotent": false,
	//           "reversible": true,
	//           "confirmation": "never",
	//           "available": true
	//         }
	//       ]
	//     }
	//   ],
	//   "procedures": []
	// }
}

// exampleT stands in for a test's *testing.T in Example. It implements
// only what the harness uses; the embedded nil testing.TB supplies the
// rest of the interface.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()                           {}
func (t *exampleT) Context() context.Context          { return context.Background() }
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Logf(string, ...any)               {}

// end runs the cleanups, last registered first, as a test's end does.
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
