package surface

import (
	"context"
	"sync"
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

// consumerID names a consumer: kind and id, kept apart so that no id can
// impersonate another consumer's.
type consumerID struct {
	kind ConsumerKind
	id   string
}

// dedupeConsumer holds the keys of one consumer, by invocation id, while
// it has any.
type dedupeConsumer struct {
	id      consumerID
	key     string // kind:id, shared by its entries' calls and audit records
	entries map[string]*dedupeEntry
}

// dedupeEntry is one idempotency key: in flight until settled, then
// terminal (cached) or removed. Its fields are guarded by the cache's
// lock; result is written once, before done is closed, and never again.
type dedupeEntry struct {
	owner        *dedupeConsumer
	invocationID string
	fingerprint  uint64
	done         chan struct{} // made for the first joiner, closed when the entry settles; joiners got it from begin
	result       Result
	terminal     bool
	expires      time.Time
	order        links // in dedupeCache.order
	expiry       links // in dedupeCache.expiry, once terminal
}

// links place an entry in one of the cache's lists.
type links struct{ prev, next *dedupeEntry }

// entryList is a doubly linked list of entries threaded through one of
// their links.
type entryList struct {
	head, tail *dedupeEntry
	links      func(*dedupeEntry) *links
}

func (l *entryList) pushBack(e *dedupeEntry) {
	l.links(e).prev = l.tail
	if l.tail != nil {
		l.links(l.tail).next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *entryList) remove(e *dedupeEntry) {
	k := l.links(e)
	if k.prev != nil {
		l.links(k.prev).next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		l.links(k.next).prev = k.prev
	} else {
		l.tail = k.prev
	}
	*k = links{}
}

// dedupeCache maps each consumer's invocation ids to requests, bounded by
// size and TTL (semantics §6): one FIFO under one lock, so that the size most
// recent keys are kept, whoever made them. Entries keep their insertion
// position when they become terminal; hits do not refresh it; entries in
// flight are never evicted. Because the TTL is constant, terminal entries
// expire in the order they settled: expiry lists them in that order, so
// pruning only ever looks at its front.
type dedupeCache struct {
	mu        sync.Mutex
	size      int
	n         int // entries
	consumers map[consumerID]*dedupeConsumer
	order     entryList // every entry, oldest first
	expiry    entryList // terminal entries, soonest to expire first
}

func newDedupeCache(size int) *dedupeCache {
	return &dedupeCache{
		size:      size,
		consumers: make(map[consumerID]*dedupeConsumer),
		order:     entryList{links: func(e *dedupeEntry) *links { return &e.order }},
		expiry:    entryList{links: func(e *dedupeEntry) *links { return &e.expiry }},
	}
}

// begin prunes expired entries, evicts the oldest while over size
// (stopping at one in flight), looks the key up and, on a miss, records
// the request as in flight before any pipeline work is observable. As in
// semantics §6, eviction comes before the new key is added, so the cache
// may hold size + 1 entries until the next begin. On a miss the entry
// returned carries the consumer's key string (owner.key). On a join or a
// replay it returns the entry found; a joiner also gets the channel
// closed when the entry settles, after which it may read the entry's
// result.
func (c *dedupeCache) begin(key dedupeKey, fp uint64, now time.Time) (*dedupeEntry, dedupeHit, <-chan struct{}) {
	// Made before the lock is taken, so that the other callers never wait
	// for an allocation (and the garbage-collection work it may do).
	fresh := &dedupeEntry{invocationID: key.invocationID, fingerprint: fp}
	cid := consumerID{key.kind, key.consumer}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.expiry.head; e != nil && !e.expires.After(now); e = c.expiry.head {
		c.remove(e)
	}
	for c.n > c.size && c.order.head.terminal {
		c.remove(c.order.head)
	}
	owner := c.consumers[cid]
	if owner == nil { // a new consumer: a miss, which adds its first entry below
		owner = &dedupeConsumer{id: cid, key: Consumer{Kind: cid.kind, ID: cid.id}.Key(), entries: make(map[string]*dedupeEntry)}
		c.consumers[cid] = owner
	}
	if e := owner.entries[key.invocationID]; e != nil {
		switch {
		case e.fingerprint != fp:
			return nil, dedupeConflict, nil
		case e.terminal:
			return e, dedupeReplay, nil
		}
		if e.done == nil {
			e.done = make(chan struct{})
		}
		return e, dedupeJoin, e.done
	}
	fresh.owner = owner
	owner.entries[fresh.invocationID] = fresh
	c.order.pushBack(fresh)
	c.n++
	return fresh, dedupeMiss, nil
}

// finish stores the result of an entry in flight and wakes its joiners. A
// cacheable result makes the entry terminal until now + ttl; any other
// removes the key, so the next call with it is a new attempt.
func (c *dedupeCache) finish(e *dedupeEntry, res Result, cache bool, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.result = res
	if e.done != nil {
		close(e.done)
		e.done = nil
	}
	if !cache {
		c.remove(e)
		return
	}
	e.terminal, e.expires = true, now.Add(ttl)
	c.expiry.pushBack(e)
}

// remove drops e from the cache, and its consumer with its last entry.
func (c *dedupeCache) remove(e *dedupeEntry) {
	delete(e.owner.entries, e.invocationID)
	if len(e.owner.entries) == 0 {
		delete(c.consumers, e.owner.id)
	}
	c.n--
	c.order.remove(e)
	if e.terminal {
		c.expiry.remove(e)
	}
}

// len returns the number of entries.
func (c *dedupeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// known answers a call whose key the dedupe cache knows: it joins the
// call in flight, replays the cached result, or fails INVOCATION_CONFLICT
// (reported, never stored, revealing nothing of the other request).
func (r *Registry) known(ctx context.Context, a *attempt, entry *dedupeEntry, hit dedupeHit, settled <-chan struct{}) Result {
	switch hit {
	case dedupeJoin:
		select {
		case <-settled:
			return entry.result.clone()
		case <-ctx.Done():
			return a.result(r, NewError(CodeCancelled, "", nil))
		case <-r.closingCh:
			return a.result(r, cancelledByClose())
		}
	case dedupeReplay:
		return entry.result.clone()
	}
	emit(r, InvocationStarted{InvocationID: a.id(), CapabilityID: a.inv.CapabilityID, ConsumerID: a.call.Consumer.ID})
	a.consumerKey = a.call.Consumer.Key()
	r.observeStart(ctx, a) // observe: the invocation starts (and settles below, in settled)
	res := a.result(r, NewReasonError(CodeInvocationConflict, ReasonIDReused, ""))
	r.settled(ctx, a, res, r.now(), true)
	return res
}
