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
// takes mu, raises the writer flag, which readers only read, and waits for
// every slot to empty; a reader that finds the flag raised leaves its slot
// and reads under mu instead, behind the writer.
//
// Each side writes its own word before it reads the other's (the reader
// its slot, then the flag; the writer the flag, then the slots), and
// atomics are sequentially consistent, so at least one of them sees the
// other: a reader never reads while a writer writes.
type readLock struct {
	mu     sync.Mutex  // writers, and readers that found a writer
	writer atomic.Bool // raised by a writer from before it waits for readers until it unlocks
	mask   uint32      // slots in use - 1: a power of two, fixed before first use
	_      [cacheLine]byte
	slots  [readSlots]readSlot
}

// readSlots is the number of reader slots: readers whose slots differ
// share no cache line.
const readSlots = maxMemLanes

// init sizes the slots in use for procs processors: as many, rounded up to
// a power of two, up to readSlots. Fewer slots are fewer for a writer to
// check. A zero readLock uses one.
func (l *readLock) init(procs int) {
	n := uint32(1)
	for int(n) < procs && n < readSlots {
		n *= 2
	}
	l.mask = n - 1
}

// cacheLine is the cache line size the layout assumes.
const cacheLine = 64

type readSlot struct {
	n atomic.Int32 // readers inside
	_ [cacheLine - 4]byte
}

// RLock read-locks l, counting the reader in the given slot (reduced
// modulo the slots in use). It returns whether the reader had to wait
// behind a writer, which RUnlock needs to know.
func (l *readLock) RLock(slot uint32) (waited bool) {
	s := &l.slots[slot&l.mask]
	s.n.Add(1)
	if !l.writer.Load() {
		return false
	}
	s.n.Add(-1) // let the writer in, and read behind it
	l.mu.Lock()
	return true
}

// RUnlock undoes RLock(slot) that returned waited.
func (l *readLock) RUnlock(slot uint32, waited bool) {
	if waited {
		l.mu.Unlock()
		return
	}
	l.slots[slot&l.mask].n.Add(-1)
}

// Lock write-locks l: it waits for the readers inside to leave.
func (l *readLock) Lock() {
	l.mu.Lock()
	l.writer.Store(true)
	if l.readers() {
		l.waitReaders()
	}
}

// readers reports whether a slot in use counts a reader.
func (l *readLock) readers() bool {
	var n int32
	for i := range l.mask + 1 {
		n |= l.slots[i].n.Load()
	}
	return n != 0
}

// waitReaders yields until the readers inside have left.
func (l *readLock) waitReaders() {
	for l.readers() {
		runtime.Gosched()
	}
}

// Unlock releases the write lock.
func (l *readLock) Unlock() {
	l.writer.Store(false)
	l.mu.Unlock()
}
