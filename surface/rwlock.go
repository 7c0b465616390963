package surface

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// readLock is the registry's reader-writer lock. Invocations read-lock it
// to resolve their target: there are many of them, on every processor, and
// each holds it for well under a microsecond without calling user code.
// Mutations write-lock it, and they are few.
//
// A sync.RWMutex counts its readers in one word, which every read-lock and
// read-unlock writes, so with invocations on several processors that cache
// line moves between them twice per invocation. Here a reader counts itself
// in a slot of its own, one per cache line, chosen by the caller (a
// pipeline's audit lane: pipelines are pooled per processor). A writer
// takes the state word, which readers only read, and waits for every slot
// to empty; a reader that finds the state taken leaves its slot and takes
// the lock as a writer would, behind the writer.
//
// Each side writes its own word before it reads the other's (the reader
// its slot, then the state; the writer the state, then the slots), and
// atomics are sequentially consistent, so at least one of them sees the
// other: a reader never reads while a writer writes.
//
// The state is also the writers' mutex: an uncontended Lock is one
// compare-and-swap and Unlock one swap. Contended lockers queue on mu, and
// the first in line sleeps on wake until Unlock signals it.
type readLock struct {
	state atomic.Int32               // unlocked, locked or lockedWaited
	procs int32                      // processors to make slots for; 0: GOMAXPROCS at the first reader
	mu    sync.Mutex                 // lockers that found the lock taken, in line
	wake  chan struct{}              // Unlock's signal to the first in line; made by the first to wait
	slots atomic.Pointer[[]readSlot] // made by the first reader: a registry never invoked stays small
}

// The states of a readLock.
const (
	unlocked     = iota
	locked       // by a writer, or by a reader that met one
	lockedWaited // and a locker sleeps on wake: Unlock must signal it
)

// maxReadSlots bounds the reader slots.
const maxReadSlots = maxMemLanes

// cacheLine is the cache line size the layout assumes.
const cacheLine = 64

// readSlot is a reader count on a cache line of its own (slot arrays are
// allocated whole, and their size classes are multiples of 64 bytes).
type readSlot struct {
	n atomic.Int32 // readers inside
	_ [cacheLine - 4]byte
}

// slotsFor is the number of slots for procs processors: as many, rounded
// up to a power of two, up to maxReadSlots. Fewer slots are fewer for a
// writer to check.
func slotsFor(procs int) int {
	n := 1
	for n < procs && n < maxReadSlots {
		n *= 2
	}
	return n
}

// RLock read-locks l, counting the reader in the given slot (reduced
// modulo the slots). It returns whether the reader had to wait behind a
// writer, which RUnlock needs to know.
func (l *readLock) RLock(slot uint32) (waited bool) {
	slots := l.slotsMade()
	s := &slots[int(slot)&(len(slots)-1)]
	s.n.Add(1)
	if l.state.Load() == unlocked {
		return false
	}
	s.n.Add(-1) // let the writer in, and read behind it
	l.Lock()
	return true
}

// slotsMade returns the slots, making them on first use. (A writer that
// finds none has no reader to wait for: a reader makes them before it
// counts itself, and counts itself before it looks for a writer.)
func (l *readLock) slotsMade() []readSlot {
	if p := l.slots.Load(); p != nil {
		return *p
	}
	procs := int(l.procs)
	if procs == 0 {
		procs = runtime.GOMAXPROCS(0)
	}
	made := make([]readSlot, slotsFor(procs))
	if l.slots.CompareAndSwap(nil, &made) {
		return made
	}
	return *l.slots.Load()
}

// RUnlock undoes RLock(slot) that returned waited.
func (l *readLock) RUnlock(slot uint32, waited bool) {
	if waited {
		l.Unlock()
		return
	}
	slots := *l.slots.Load()
	slots[int(slot)&(len(slots)-1)].n.Add(-1)
}

// Lock write-locks l: it waits for the readers inside to leave.
func (l *readLock) Lock() {
	if !l.state.CompareAndSwap(unlocked, locked) {
		l.lockSlow()
	}
	if l.readers() {
		l.waitReaders()
	}
}

// lockSlow waits for the state, in line on mu. The first in line marks
// the state lockedWaited before it sleeps, so the Unlock that frees it
// signals wake; a signal sent before the sleep waits in the channel. Only
// the first in line marks the state and sleeps, and it takes the state
// (as locked) before it lets the next in, so at most one signal is ever
// pending and Unlock's send never blocks.
func (l *readLock) lockSlow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{}, 1) // before the mark that lets Unlock see it
	}
	for !l.state.CompareAndSwap(unlocked, locked) {
		if l.state.CompareAndSwap(locked, lockedWaited) {
			<-l.wake
		}
	}
}

// readers reports whether a slot counts a reader.
func (l *readLock) readers() bool {
	p := l.slots.Load()
	if p == nil {
		return false
	}
	var n int32
	for i := range *p {
		n |= (*p)[i].n.Load()
	}
	return n != 0
}

// waitReaders yields until the readers inside have left.
func (l *readLock) waitReaders() {
	for l.readers() {
		runtime.Gosched()
	}
}

// Unlock releases the write lock, and wakes the first locker in line.
func (l *readLock) Unlock() {
	if l.state.Swap(unlocked) == lockedWaited {
		l.wake <- struct{}{}
	}
}
