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
	var l readLock
	l.init(8)
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
	for i := range l.slots {
		if n := l.slots[i].n.Load(); n != 0 {
			t.Fatalf("slot %d counts %d readers after all left", i, n)
		}
	}
}

// A writer waits for a reader inside, and announces itself first: readers
// that come later wait behind it.
func TestReadLockWriterWaitsForReader(t *testing.T) {
	var l readLock
	l.init(5) // 8 slots
	if waited := l.RLock(3); waited {
		t.Fatal("a reader waited with no writer about")
	}
	done := make(chan struct{})
	go func() {
		l.Lock()
		close(done)
		l.Unlock()
	}()
	for !l.writer.Load() { // until the writer is in, waiting for slot 3
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

// Slots are a cache line apart, and the first is a line away from the
// words every reader reads (the writer flag).
func TestReadLockLayout(t *testing.T) {
	var l readLock
	if d := uintptr(unsafe.Pointer(&l.slots[1])) - uintptr(unsafe.Pointer(&l.slots[0])); d < cacheLine {
		t.Fatalf("slots %d bytes apart", d)
	}
	if d := uintptr(unsafe.Pointer(&l.slots[0])) - uintptr(unsafe.Pointer(&l.writer)); d < cacheLine {
		t.Fatalf("first slot %d bytes after the writer flag", d)
	}
}

// The slots in use are the processors rounded up to a power of two, at
// most readSlots; a zero lock uses one.
func TestReadLockSlots(t *testing.T) {
	for _, c := range []struct{ procs, slots uint32 }{{0, 1}, {1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {8, 8}, {64, 8}} {
		var l readLock
		l.init(int(c.procs))
		if l.mask+1 != c.slots {
			t.Errorf("%d processors: %d slots, want %d", c.procs, l.mask+1, c.slots)
		}
	}
}
