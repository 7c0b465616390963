package surface

import (
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

// Readers and writers hammer one readLock. Writers change two plain
// counters one after the other, yielding in between; a reader must never
// see them differ, and the race detector must see every access ordered.
// Readers use all slots, several per slot, so that some meet a writer and
// take the waiting path.
func TestReadLockExcludesWriters(t *testing.T) {
	l := readLock{procs: 8}
	var x, y int
	const readers, writers, rounds = 12, 3, 3000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for range rounds / 10 {
				l.Lock()
				x++
				if w%2 == 0 {
					runtime.Gosched()
				}
				y++
				l.Unlock()
			}
		})
	}
	waits := make([]int, readers)
	for g := range readers {
		wg.Go(func() {
			slot := uint32(g) // 12 readers over 8 slots: some share
			for range rounds {
				waited := l.RLock(slot)
				if x != y {
					t.Errorf("reader %d saw a write in progress: x=%d y=%d", g, x, y)
				}
				l.RUnlock(slot, waited)
				if waited {
					waits[g]++
				}
			}
		})
	}
	wg.Wait()
	if x != writers*rounds/10 || x != y {
		t.Fatalf("x=%d y=%d, want both %d", x, y, writers*rounds/10)
	}
	slots := *l.slots.Load()
	for i := range slots {
		if n := slots[i].n.Load(); n != 0 {
			t.Fatalf("slot %d counts %d readers after all left", i, n)
		}
	}
}

// Writers alone contend for the state: they yield while holding it, so the
// others queue and sleep, and each Unlock must wake the first in line. A
// lost wake-up hangs the test; a writer let in early is a race on n.
func TestReadLockWritersQueue(t *testing.T) {
	var l readLock
	n := 0
	const writers, rounds = 8, 500
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range rounds {
				l.Lock()
				n++
				runtime.Gosched()
				l.Unlock()
			}
		})
	}
	wg.Wait()
	if n != writers*rounds {
		t.Fatalf("n = %d, want %d", n, writers*rounds)
	}
	if st := l.state.Load(); st != unlocked {
		t.Fatalf("state %d after every writer left", st)
	}
	if l.wake == nil {
		t.Fatal("no writer ever waited: the queue was not exercised")
	}
	select {
	case <-l.wake:
		t.Fatal("a wake-up was left pending")
	default:
	}
}

// A writer waits for a reader inside, and announces itself first: readers
// that come later wait behind it.
func TestReadLockWriterWaitsForReader(t *testing.T) {
	l := readLock{procs: 5} // 8 slots
	if waited := l.RLock(3); waited {
		t.Fatal("a reader waited with no writer about")
	}
	done := make(chan struct{})
	go func() {
		l.Lock()
		close(done)
		l.Unlock()
	}()
	for l.state.Load() == unlocked { // until the writer is in, waiting for slot 3
		select {
		case <-done:
			t.Fatal("the writer went in while a reader was inside")
		default:
			runtime.Gosched()
		}
	}
	select {
	case <-done:
		t.Fatal("the writer went in while a reader was inside")
	default:
	}
	l.RUnlock(3, false)
	<-done
	if waited := l.RLock(11); waited { // slot 3 again (11 mod 8), writer gone
		t.Fatal("a reader waited after the writer left")
	}
	l.RUnlock(11, false)
}

// Slots are a cache line apart, made by the first reader, and none of
// them shares a line with another allocation: the slot array's size is a
// multiple of the line, and so is its alignment.
func TestReadLockLayout(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 8} {
		l := readLock{procs: int32(procs)}
		if l.slots.Load() != nil {
			t.Fatal("slots made before a reader came")
		}
		l.RUnlock(0, l.RLock(0))
		slots := *l.slots.Load()
		if len(slots) != slotsFor(procs) {
			t.Fatalf("%d slots for %d processors", len(slots), procs)
		}
		if a := uintptr(unsafe.Pointer(&slots[0])); a%cacheLine != 0 {
			t.Errorf("%d processors: slots at %#x, not on a line boundary", procs, a)
		}
		if d := unsafe.Sizeof(slots[0]); d != cacheLine {
			t.Errorf("slot is %d bytes", d)
		}
	}
}

// The slots are the processors rounded up to a power of two, at most
// maxReadSlots.
func TestReadLockSlots(t *testing.T) {
	for _, c := range []struct{ procs, slots int }{{1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {8, 8}, {64, 8}} {
		if n := slotsFor(c.procs); n != c.slots {
			t.Errorf("%d processors: %d slots, want %d", c.procs, n, c.slots)
		}
	}
}
