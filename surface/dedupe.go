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

// dedupeKey identifies an idempotency key: the consumer (kind and id, kept
// apart so no id can impersonate another consumer's key) and the
// invocation id.
type dedupeKey struct {
	kind         ConsumerKind
	consumer     string
	invocationID string
}

// dedupeEntry is one idempotency key: in flight until finished, then
// terminal (cached) or removed.
type dedupeEntry struct {
	key         dedupeKey
	fingerprint uint64
	done        chan struct{} // made for the first joiner; closed when finished
	finished    bool
	result      Result // written once, before finished is set
	terminal    bool
	expires     time.Time
	prev, next  *dedupeEntry // insertion order, oldest first
	eprev, enxt *dedupeEntry // terminal entries in expiry order, soonest first
}

// dedupeCache maps consumer + invocation id to requests, bounded by size
// and TTL (semantics §6). Entries keep their insertion position when they
// become terminal; hits do not refresh it; in-flight entries are never
// evicted. Because the TTL is constant, terminal entries expire in the
// order they settled, so pruning pops a list head instead of scanning.
type dedupeCache struct {
	mu           sync.Mutex
	m            map[dedupeKey]*dedupeEntry
	head, tail   *dedupeEntry // insertion order
	ehead, etail *dedupeEntry // expiry order
}

// begin prunes expired entries, looks the key up and, on a miss, records
// the request as in flight before any pipeline work is observable. A join
// gets the channel that closes when the entry finishes.
func (c *dedupeCache) begin(key dedupeKey, fp uint64, now time.Time, lim *Limits) (*dedupeEntry, dedupeHit, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.ehead != nil && !c.ehead.expires.After(now) {
		c.remove(c.ehead)
	}
	if e := c.m[key]; e != nil {
		switch {
		case e.fingerprint != fp:
			return e, dedupeConflict, nil
		case e.terminal:
			return e, dedupeReplay, nil
		}
		if e.done == nil {
			e.done = make(chan struct{})
		}
		return e, dedupeJoin, e.done
	}
	if c.m == nil {
		c.m = make(map[dedupeKey]*dedupeEntry)
	}
	e := &dedupeEntry{key: key, fingerprint: fp}
	c.m[key] = e
	if c.tail == nil {
		c.head, c.tail = e, e
	} else {
		e.prev, c.tail.next, c.tail = c.tail, e, e
	}
	c.evict(lim)
	return e, dedupeMiss, nil
}

// finish stores the result of an in-flight entry and wakes its joiners. A
// cacheable result makes the entry terminal; any other removes the key.
func (c *dedupeCache) finish(e *dedupeEntry, res Result, cache bool, now time.Time, lim *Limits) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.result = res
	if cache && c.m[e.key] == e {
		e.terminal = true
		e.expires = now.Add(lim.DedupeCacheTTL)
		if c.etail == nil {
			c.ehead, c.etail = e, e
		} else {
			e.eprev, c.etail.enxt, c.etail = c.etail, e, e
		}
	} else if c.m[e.key] == e {
		c.remove(e)
	}
	e.finished = true
	if e.done != nil {
		close(e.done)
	}
	c.evict(lim)
}

// evict drops the oldest entries while over size, stopping at one still
// in flight.
func (c *dedupeCache) evict(lim *Limits) {
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
	if !e.terminal {
		return
	}
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
