package surface

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

type dedupeHit int

const (
	dedupeMiss     dedupeHit = iota // a new attempt: run the pipeline
	dedupeJoin                      // same request in flight: wait for it
	dedupeReplay                    // same request settled: its result
	dedupeConflict                  // same key, different request
)

// dedupeKey identifies an idempotency key: the consumer (kind and id, kept
// apart so no id can impersonate another consumer's key) and the
// invocation id.
type dedupeKey struct {
	kind         ConsumerKind
	consumer     string
	invocationID string
}

// hash hashes the key's fields, each behind a NUL (which no id contains
// unescaped, and the lengths keep apart anyway).
func (k dedupeKey) hash(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(string(k.kind))
	h.WriteByte(0)
	h.WriteString(k.consumer)
	h.WriteByte(0)
	h.WriteString(k.invocationID)
	return h.Sum64()
}

// dedupeEntry is one idempotency key: in flight until finished, then
// terminal (cached) or removed. The fields the store reads and links under
// its lock come first, on the first cache line or two; the key, compared
// only when a hash matches, and the result, read only by replays and
// joins, come last.
type dedupeEntry struct {
	hash        uint64        // of key
	prev, next  *dedupeEntry  // insertion order, oldest first
	eprev, enxt *dedupeEntry  // terminal entries in expiry order, soonest first
	nextFree    *dedupeEntry  // next on the store's free list
	snext       *dedupeEntry  // next on the settled stack
	state       atomic.Uint32 // entryInFlight, entryJoined or entrySettled
	linked      bool          // in the store's index and lists
	finished    bool          // set under the lock once the finisher is done with the entry
	terminal    bool          // cached: set when a drain links it by expiry
	expires     time.Time     // written by the finisher, with result
	fingerprint uint64
	done        chan struct{} // made for the first joiner; closed when finished
	key         dedupeKey
	result      Result // written once, by the finisher, before it publishes the entry
}

// Entry states. The first joiner (under the store's lock) makes done,
// then moves an in-flight entry to joined; the finisher moves it to
// settled, and closes done if it finds it joined. Whichever of the two
// compare-and-swaps loses knows that the other one will not close done:
// a joiner that finds the entry settled closes it itself.
const (
	entryInFlight uint32 = iota
	entryJoined
	entrySettled
)

// dedupeCache maps consumer + invocation id to requests, bounded by size
// and TTL (semantics §6). It is one FIFO under one lock, so that the size
// is exact: the size most recent keys are kept, whoever made them. (Split
// by key into shards, each with its share of the size, a caller's keys
// crowd some shards before others fill, and a shard evicts keys that a
// single FIFO would keep.) The body is allocated on first use, so an idle
// registry stays small and the lock shares no cache line with the
// registry's read-mostly fields.
type dedupeCache struct {
	once sync.Once
	size int
	s    *dedupeStore
}

// init sets the size; the body is made on first use.
func (c *dedupeCache) init(size int) { c.size = size }

func (c *dedupeCache) body() *dedupeStore {
	c.once.Do(func() { c.s = &dedupeStore{capacity: c.size} })
	return c.s
}

// begin records or finds the key; see dedupeStore.begin.
func (c *dedupeCache) begin(key dedupeKey, seed maphash.Seed, fp uint64, now time.Time, replay *Result) (*dedupeEntry, dedupeHit, <-chan struct{}) {
	return c.body().begin(key, key.hash(seed), fp, now, replay)
}

// finish settles an entry; see dedupeStore.finish.
func (c *dedupeCache) finish(e *dedupeEntry, res Result, cache bool, now time.Time, ttl time.Duration) {
	c.body().finish(e, res, cache, now, ttl)
}

// dedupeStore is the body of the cache: one FIFO. Entries keep their insertion
// position when they become terminal; hits do not refresh it; in-flight
// entries are never evicted. Because the TTL is constant, terminal
// entries expire in the order they settled, so pruning pops a list head
// instead of scanning.
//
// A settlement that is cached, the common one, takes no lock: the
// finisher pushes its entry on the settled stack, and the next holder of
// the lock drains the stack, in push order, before it reads anything
// else. A settlement is thus ordered at its push, and every begin sees
// the ones pushed before it drained. (Each invocation takes the lock once
// instead of twice, which halves the time two processors wait for it.)
type dedupeStore struct {
	mu           sync.Mutex
	idx          hashIndex[dedupeEntry] // the entries by key hash; idx.n counts them
	capacity     int                    // entries kept once terminal
	head, tail   *dedupeEntry           // insertion order
	ehead, etail *dedupeEntry           // expiry order
	free         *dedupeEntry           // removed entries no one can reach, by nextFree
	nfree        int
	_            [64]byte                    // keeps the lock's line and the stack's apart
	settled      atomic.Pointer[dedupeEntry] // cached settlements not yet drained, newest first, by snext
}

// begin prunes expired entries, evicts the oldest while over size
// (stopping at one in flight), looks the key up and, on a miss, records
// the request as in flight before any pipeline work is observable. As in
// semantics §6, eviction comes before the new key is added, so the cache
// may hold size + 1 entries until the next begin: if the new entry is
// then dropped (an uncacheable result), the oldest one stays. A join
// gets the channel that closes when the entry finishes; a replay gets a
// copy of the cached result in *replay, taken under the lock because the
// entry may be reused once it is evicted. h is the key's hash, computed
// before the lock is taken.
func (c *dedupeStore) begin(key dedupeKey, h uint64, fp uint64, now time.Time, replay *Result) (*dedupeEntry, dedupeHit, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drain()
	for c.ehead != nil && !c.ehead.expires.After(now) {
		c.remove(c.ehead)
	}
	c.evict()
	if e := c.lookup(key, h); e != nil {
		switch {
		case e.fingerprint != fp:
			return nil, dedupeConflict, nil
		case e.terminal:
			*replay = e.result
			return nil, dedupeReplay, nil
		}
		if e.done == nil {
			// Joiners read e later: an entry with done is never reused.
			e.done = make(chan struct{})
			if !e.state.CompareAndSwap(entryInFlight, entryJoined) {
				close(e.done) // settled since the drain: nothing will close it
			}
		}
		return e, dedupeJoin, e.done
	}
	e := c.free
	if e != nil { // zeroed by recycle but for nextFree
		c.free, c.nfree, e.nextFree = e.nextFree, c.nfree-1, nil
	} else {
		e = new(dedupeEntry)
	}
	e.key, e.hash, e.fingerprint, e.linked = key, h, fp, true
	c.idx.add(e, h)
	if c.tail == nil {
		c.head, c.tail = e, e
	} else {
		e.prev, c.tail.next, c.tail = c.tail, e, e
	}
	return e, dedupeMiss, nil
}

// finish stores the result of an in-flight entry and wakes its joiners. A
// cacheable result makes the entry terminal; any other removes the key.
// Nothing is evicted here: the next begin does it, before its lookup.
//
// A cacheable result takes no lock: the entry is published on the settled
// stack, which the next begin drains under the lock before anything else,
// so every begin sees the settlements that came before it.
func (c *dedupeStore) finish(e *dedupeEntry, res Result, cache bool, now time.Time, ttl time.Duration) {
	e.result = res
	if cache {
		e.expires = now.Add(ttl)
		if !e.state.CompareAndSwap(entryInFlight, entrySettled) {
			close(e.done) // a joiner made it before marking the entry joined
		}
		// The push is the last touch of e: once it is on the stack, a
		// drain may make it terminal, evict it and reuse it.
		for {
			top := c.settled.Load()
			e.snext = top
			if c.settled.CompareAndSwap(top, e) {
				return
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drain()
	if e.state.Swap(entrySettled) == entryJoined {
		close(e.done)
	}
	e.finished = true
	c.remove(e) // after finished is set: remove may reuse it
}

// drain makes the settlements on the settled stack terminal, in the order
// they were pushed, appending them to the expiry list. Called under mu.
func (c *dedupeStore) drain() {
	top := c.settled.Swap(nil)
	if top == nil {
		return
	}
	// Reverse the stack, newest first, into push order.
	var first *dedupeEntry
	for e := top; e != nil; {
		next := e.snext
		e.snext, first = first, e
		e = next
	}
	for e := first; e != nil; {
		next := e.snext
		e.snext = nil
		e.terminal, e.finished = true, true
		if c.etail == nil {
			c.ehead, c.etail = e, e
		} else {
			e.eprev, c.etail.enxt, c.etail = c.etail, e, e
		}
		e = next
	}
}

// evict drops the oldest entries while over size, stopping at one still
// in flight.
func (c *dedupeStore) evict() {
	for c.idx.n > c.capacity && c.head != nil && c.head.terminal {
		c.remove(c.head)
	}
}

// lookup returns the entry of key, whose hash is h, or nil.
func (c *dedupeStore) lookup(key dedupeKey, h uint64) *dedupeEntry {
	return c.idx.find(h, func(e *dedupeEntry) bool { return e.key == key })
}

func (c *dedupeStore) remove(e *dedupeEntry) {
	c.idx.remove(e, e.hash)
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
	if e.terminal {
		if e.eprev != nil {
			e.eprev.enxt = e.enxt
		} else {
			c.ehead = e.enxt
		}
		if e.enxt != nil {
			e.enxt.eprev = e.eprev
		} else {
			c.etail = e.eprev
		}
		e.eprev, e.enxt = nil, nil
	}
	e.linked = false
	c.recycle(e)
}

// recycle keeps a removed entry for reuse unless someone may still read
// it: its in-flight caller (until finish) or a joiner (any entry that got
// a done channel).
func (c *dedupeStore) recycle(e *dedupeEntry) {
	if !e.finished || e.done != nil || c.nfree >= c.capacity {
		return
	}
	*e = dedupeEntry{nextFree: c.free} // state is entryInFlight again
	c.free = e
	c.nfree++
}
