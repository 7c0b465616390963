package surface

import (
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

// dedupeEntry is one idempotency key: in flight until done is closed, then
// terminal (cached) or removed.
type dedupeEntry struct {
	key         string
	fingerprint uint64
	done        chan struct{}
	result      Result // written once, before done is closed
	terminal    bool
	expires     time.Time
	prev, next  *dedupeEntry // insertion order, oldest first
}

// dedupeCache maps consumerKey + " " + invocationId to requests, bounded
// by size and TTL (semantics §6). Entries keep their insertion position
// when they become terminal; hits do not refresh it; in-flight entries are
// never evicted.
type dedupeCache struct {
	mu         sync.Mutex
	m          map[string]*dedupeEntry
	head, tail *dedupeEntry
}

// begin looks the key up and, on a miss, records the request as in flight
// before any pipeline work is observable.
func (c *dedupeCache) begin(key string, fp uint64, now time.Time, lim *Limits) (*dedupeEntry, dedupeHit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		switch {
		case !e.terminal && e.fingerprint == fp:
			return e, dedupeJoin
		case !e.terminal:
			return e, dedupeConflict
		case e.expires.After(now) && e.fingerprint == fp:
			return e, dedupeReplay
		case e.expires.After(now):
			return e, dedupeConflict
		}
		c.remove(e) // expired: a new attempt
	}
	if c.m == nil {
		c.m = make(map[string]*dedupeEntry)
	}
	e := &dedupeEntry{key: key, fingerprint: fp, done: make(chan struct{})}
	c.m[key] = e
	if c.tail == nil {
		c.head, c.tail = e, e
	} else {
		e.prev, c.tail.next, c.tail = c.tail, e, e
	}
	c.evict(now, lim)
	return e, dedupeMiss
}

// finish stores the result of an in-flight entry and wakes its joiners. A
// cacheable result makes the entry terminal; any other removes the key.
func (c *dedupeCache) finish(e *dedupeEntry, res Result, cache bool, now time.Time, lim *Limits) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.result = res
	if cache {
		e.terminal = true
		e.expires = now.Add(lim.DedupeCacheTTL)
	} else if c.m[e.key] == e {
		c.remove(e)
	}
	close(e.done)
	c.evict(now, lim)
}

// evict keeps the cache within its size: when over, it first drops every
// expired terminal entry, then the oldest entries, stopping at one still
// in flight.
func (c *dedupeCache) evict(now time.Time, lim *Limits) {
	if len(c.m) <= lim.DedupeCacheSize {
		return
	}
	for e := c.head; e != nil; {
		next := e.next
		if e.terminal && !e.expires.After(now) {
			c.remove(e)
		}
		e = next
	}
	for len(c.m) > lim.DedupeCacheSize && c.head != nil && c.head.terminal {
		c.remove(c.head)
	}
}

func (c *dedupeCache) remove(e *dedupeEntry) {
	delete(c.m, e.key)
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
}

// len returns the number of keys held.
func (c *dedupeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
