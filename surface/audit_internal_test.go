package surface

import (
	"strconv"
	"testing"
)

// AS-OBSV-001: a record whose lane another processor holds goes to the
// first free lane after it, and record says which, so that the caller
// stays there; when every lane is busy it waits for its own. Events merges
// the lanes back into record order either way.
func TestMemorySinkMovesOffBusyLane_AS_OBSV_001(t *testing.T) {
	s := NewMemorySink(16)
	s.once.Do(func() { s.initLanes(3) })
	lanes := s.ring.lanes
	rec := func(i, lane int) int {
		return s.record(&AuditEvent{Type: AuditInvocationSettled, InvocationID: "inv_" + strconv.Itoa(i)}, lane)
	}

	if got := rec(0, 1); got != 1 {
		t.Fatalf("free lane 1: record wrote lane %d", got)
	}
	lanes[1].mu.Lock() // another processor is on lane 1
	if got := rec(1, 1); got != 2 {
		t.Fatalf("lane 1 busy: record wrote lane %d, want 2", got)
	}
	lanes[2].mu.Lock() // … and on lane 2
	if got := rec(2, 1); got != 3 {
		t.Fatalf("lanes 1 and 2 busy: record wrote lane %d, want 3 (lane 0 of 3)", got)
	}
	lanes[0].mu.Lock() // every lane busy: wait for lane 1
	wrote := make(chan int)
	go func() { wrote <- rec(3, 1) }()
	lanes[1].mu.Unlock()
	if got := <-wrote; got != 1 {
		t.Fatalf("all lanes busy: record wrote lane %d, want to wait for 1", got)
	}
	lanes[0].mu.Unlock()
	lanes[2].mu.Unlock()

	if n := [3]uint64{lanes[0].n, lanes[1].n, lanes[2].n}; n != [3]uint64{1, 2, 1} {
		t.Fatalf("records per lane = %v, want [1 2 1]", n)
	}
	ev := s.Events()
	if len(ev) != 4 {
		t.Fatalf("Events returned %d records, want 4", len(ev))
	}
	for i, e := range ev {
		if want := "inv_" + strconv.Itoa(i); e.InvocationID != want {
			t.Fatalf("record %d is %s, want %s (record order)", i, e.InvocationID, want)
		}
	}
}
