package replica

import "sync"

// ownership is what this replica knows of who owns which session: the
// keys it claimed under its current registration, the released ones
// whose rows the next renewal deletes, and the owners of other replicas'
// keys it looked up. None of it needs Postgres to be read.
type ownership struct {
	mu       sync.Mutex
	reg      string           // the registration the keys are claimed under; "" while there is none
	own      map[key]struct{} // keys claimed under reg
	releases []key            // released keys not yet deleted from the table
	owners   map[key]string   // owner id of other replicas' keys looked up
}

func (o *ownership) init() {
	o.own = map[key]struct{}{}
	o.owners = map[key]string{}
}

// begin forgets every key claimed so far and every release not yet
// written (the rows go with their registration), and claims from now on
// under reg ("" for none: a lost lease). It returns how many keys were
// forgotten.
func (o *ownership) begin(reg string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.own)
	o.reg, o.own, o.releases = reg, map[key]struct{}{}, nil
	return n
}

// add records keys claimed under reg; false if reg is not the current
// registration (the lease was lost while claiming).
func (o *ownership) add(reg string, ks []key) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if reg != o.reg || reg == "" {
		return false
	}
	for _, k := range ks {
		o.own[k] = struct{}{}
	}
	return true
}

// owns reports whether k was claimed here and not released.
func (o *ownership) owns(k key) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.own[k]
	return ok
}

// count returns how many keys are owned.
func (o *ownership) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.own)
}

// release forgets owned keys and queues their rows for deletion.
func (o *ownership) release(ks []key) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range ks {
		if _, ok := o.own[k]; !ok {
			continue
		}
		delete(o.own, k)
		if len(o.releases) < maxReleases {
			o.releases = append(o.releases, k)
		}
	}
}

// takeReleases returns the releases of registration reg for a renewal to
// delete; the renewal puts them back if it fails.
func (o *ownership) takeReleases(reg string) []key {
	o.mu.Lock()
	defer o.mu.Unlock()
	if reg != o.reg {
		return nil
	}
	ks := o.releases
	o.releases = nil
	return ks
}

// putBackReleases returns releases a failed renewal did not delete.
func (o *ownership) putBackReleases(reg string, ks []key) {
	if len(ks) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if reg != o.reg {
		return // the rows went with the registration
	}
	o.releases = append(ks, o.releases...)
	o.releases = o.releases[:min(len(o.releases), maxReleases)]
}

// cached returns the owner id remembered for k.
func (o *ownership) cached(k key) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	id, ok := o.owners[k]
	return id, ok
}

// remember records that replica id owns k.
func (o *ownership) remember(k key, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.owners) >= maxCached {
		for k := range o.owners { // forget one at random
			delete(o.owners, k)
			break
		}
	}
	o.owners[k] = id
}

// uncache forgets the owner of k.
func (o *ownership) uncache(k key) {
	o.mu.Lock()
	delete(o.owners, k)
	o.mu.Unlock()
}

// forgetOwners forgets every key owned by one of the replicas gone.
func (o *ownership) forgetOwners(gone map[string]bool) {
	if len(gone) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, id := range o.owners {
		if gone[id] {
			delete(o.owners, k)
		}
	}
}
