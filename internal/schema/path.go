package schema

// Place is what a schema declares at a property path: which JSON types a
// value there may have and, for an array, which types its items may have.
// Get one from [Schema.Lookup].
type Place struct {
	types, items typeMask
	// anyType and anyItem are set when some schema at the place, or some
	// items schema, leaves the type open (no "type" keyword).
	anyType, anyItem bool
}

// Allows reports whether a value at the place may be of JSON type t
// ("object", "array", "string", "number", "boolean" or "null";
// "integer" counts as "number"), or may be an array whose items may be.
func (p Place) Allows(t string) bool {
	m := typeByName(t)
	if m == 0 {
		return false
	}
	if m == tNumber {
		m |= tInteger
	}
	return p.anyType || p.types&m != 0 || p.types&tArray != 0 && (p.anyItem || p.items&m != 0)
}

// Lookup reports whether the schema declares the property path, names
// from the root (an empty path is the root itself), and what it declares
// there. It follows $ref and every branch of anyOf: a property is
// declared when some branch that can hold it declares it under
// "properties". The members of an inferred Go map are not declared
// properties, nor is anything additionalProperties admits.
func (s *Schema) Lookup(path []string) (Place, bool) {
	at := expand(nil, s.root, 0)
	for _, name := range path {
		var next []*node
		for _, n := range at {
			if p := n.prop(name); p != nil {
				next = expand(next, p, 0)
			}
		}
		if len(next) == 0 {
			return Place{}, false
		}
		at = next
	}
	var pl Place
	for _, n := range at {
		pl.add(n)
	}
	return pl, true
}

// add adds what n allows to the place.
func (pl *Place) add(n *node) {
	open := n.types == 0 && n.ref == nil && n.anyOf == nil // else its $ref and branches say
	if open {
		pl.anyType = true
	}
	pl.types |= n.types
	if !open && n.types&tArray == 0 && n.items == nil {
		return
	}
	if n.items == nil {
		pl.anyItem = true
		return
	}
	for _, it := range expand(nil, n.items, 0) {
		if it.types == 0 && it.ref == nil && it.anyOf == nil {
			pl.anyItem = true
		}
		pl.items |= it.types
	}
}

// maxExpand bounds the nesting of $ref and anyOf that expand follows (a
// compiled schema has no reference cycle that consumes no input, but the
// bound keeps the walk finite whatever it is given).
const maxExpand = 64

// expand appends n, the targets of its $ref and the branches of its
// anyOf, recursively, to out.
func expand(out []*node, n *node, depth int) []*node {
	if n == nil || depth > maxExpand {
		return out
	}
	out = append(out, n)
	out = expand(out, n.ref, depth+1)
	for _, b := range n.anyOf {
		out = expand(out, b, depth+1)
	}
	return out
}
