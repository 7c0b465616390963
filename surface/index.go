package surface

import (
	"slices"
	"strings"
)

// The registry's indexes of live registrations, guarded by Registry.mu:
// entries in snapshot order, byType by type and instance id, byProc by
// procedure path.

// entryCmp orders registrations by priority desc, type asc, instance asc.
// Live registrations never compare equal.
func entryCmp(a, b *registration) int {
	if a.priority != b.priority {
		if a.priority > b.priority {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.typ, b.typ); c != 0 {
		return c
	}
	return strings.Compare(a.instance, b.instance)
}

// instanceLocked returns the live registration of a type and instance, or
// nil.
func (r *Registry) instanceLocked(typ, instance string) *registration {
	return r.byType[typ][instance]
}

// insertLocked adds a registration that just went live to the indexes.
func (r *Registry) insertLocked(reg *registration) {
	i, _ := slices.BinarySearchFunc(r.entries, reg, entryCmp)
	r.entries = slices.Insert(r.entries, i, reg)
	if r.byType == nil {
		r.byType = make(map[string]map[string]*registration)
	}
	instances := r.byType[reg.typ]
	if instances == nil {
		instances = make(map[string]*registration)
		r.byType[reg.typ] = instances
	}
	instances[reg.instance] = reg
	for _, rc := range reg.caps[reg.nView:] {
		if r.byProc == nil {
			r.byProc = make(map[string][]*registration)
		}
		r.byProc[rc.name] = append(r.byProc[rc.name], reg)
	}
}

// removeLocked removes a registration that is going away from the
// indexes.
func (r *Registry) removeLocked(reg *registration) {
	if i, found := slices.BinarySearchFunc(r.entries, reg, entryCmp); found {
		r.entries = slices.Delete(r.entries, i, i+1)
	}
	if instances := r.byType[reg.typ]; instances != nil {
		delete(instances, reg.instance)
		if len(instances) == 0 {
			delete(r.byType, reg.typ)
		}
	}
	for _, rc := range reg.caps[reg.nView:] {
		refs := slices.DeleteFunc(r.byProc[rc.name], func(x *registration) bool { return x == reg })
		if len(refs) == 0 {
			delete(r.byProc, rc.name)
		} else {
			r.byProc[rc.name] = refs
		}
	}
}
