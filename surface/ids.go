package surface

import (
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/agentsurface/agentsurface/internal/randid"
)

// Plane separates view capabilities (observations and actions of live
// components) from domain procedure references.
type Plane string

// Planes.
const (
	PlaneView   Plane = "view"
	PlaneDomain Plane = "domain"
)

// Identifier limits (semantics §1).
const (
	// MaxIDLength is the maximum length of a component type, an instance
	// id, and a capability id.
	MaxIDLength = 128
	// defaultInstanceID is the instance id of a component that sets none.
	defaultInstanceID = "default"
)

// parsedID is a parsed capability id: "view:<type>.<name>" or
// "domain:<path>".
type parsedID struct {
	// Plane is PlaneView or PlaneDomain.
	Plane Plane
	// Type is the component type of a view id ("devices.table").
	Type string
	// Name is the capability name of a view id ("selectRows").
	Name string
	// Path is the opaque procedure path of a domain id ("devices.disable").
	Path string
}

// String formats the id; parseCapabilityID(id.String()) returns id.
func (id parsedID) String() string {
	if id.Plane == PlaneDomain {
		return "domain:" + id.Path
	}
	return viewID(id.Type, id.Name)
}

// viewID returns the capability id "view:<componentType>.<name>".
func viewID(componentType, name string) string {
	return "view:" + componentType + "." + name
}

// parseCapabilityID parses s by the id grammar. It reports false for
// anything unparseable or longer than [MaxIDLength]; such ids resolve to
// CAPABILITY_NOT_FOUND at invocation, never to an internal error.
func parseCapabilityID(s string) (parsedID, bool) {
	if len(s) > MaxIDLength {
		return parsedID{}, false
	}
	if rest, ok := strings.CutPrefix(s, "domain:"); ok {
		if rest == "" {
			return parsedID{}, false
		}
		return parsedID{Plane: PlaneDomain, Path: rest}, true
	}
	rest, ok := strings.CutPrefix(s, "view:")
	if !ok {
		return parsedID{}, false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 {
		return parsedID{}, false
	}
	typ, name := rest[:dot], rest[dot+1:]
	if !validComponentType(typ) || !validCapabilityName(name) {
		return parsedID{}, false
	}
	return parsedID{Plane: PlaneView, Type: typ, Name: name}, true
}

// validComponentType reports whether s is a component type: dot-separated
// segments matching ^[a-z][a-z0-9-]*$, at most [MaxIDLength] long.
func validComponentType(s string) bool {
	if s == "" || len(s) > MaxIDLength {
		return false
	}
	segStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' { // the common case first
			segStart = false
			continue
		}
		switch {
		case segStart: // a segment starts with a-z
			return false
		case c == '.':
			segStart = true
		case c >= '0' && c <= '9', c == '-':
		default:
			return false
		}
	}
	return !segStart // no trailing dot
}

// validCapabilityName reports whether s matches ^[a-z][A-Za-z0-9]*$.
func validCapabilityName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isAlnum(s[i]) {
			return false
		}
	}
	return true
}

// validInstanceID reports whether s matches ^[A-Za-z0-9_-]+$ and is at most
// [MaxIDLength] long.
func validInstanceID(s string) bool {
	return s != "" && len(s) <= MaxIDLength && wireSafe(s)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// jsLen is the length of s in UTF-16 code units, the unit of every
// character limit of the spec.
func jsLen(s string) int {
	n := 0
	for _, r := range s { // an invalid byte reads as U+FFFD: one unit
		n += utf16.RuneLen(r)
	}
	return n
}

const base62 = randid.Alphabet62

// The minted ids: prefix + base62 characters drawn uniformly from
// math/rand/v2's runtime generator (ChaCha8, seeded from the OS). They
// must be unpredictable enough not to collide, not secret.
func newSurfaceID() string      { return randid.Base62("srf_", 22) }
func newInvocationID() string   { return randid.Base62("inv_", 12) }
func newConfirmationID() string { return randid.Base62("cnf_", 12) }

// appendRegistrationID appends "reg_" + counter in lowercase base36,
// zero-padded to at least 4, + 6 base62 characters drawn from key and
// counter by a bijective mix (splitmix64's finaliser): distinct counters
// give distinct draws, and without the registry's random key they cannot
// be predicted. The counter alone makes the id unique.
func appendRegistrationID(b []byte, counter, key uint64) []byte {
	z := counter + key
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	var digits [13]byte // any uint64 in base 36
	d := strconv.AppendUint(digits[:0], counter, 36)
	b = append(b, "reg_"...)
	for range 4 - len(d) {
		b = append(b, '0')
	}
	b = append(b, d...)
	// Three characters from each half of z, high half first, each the
	// last digits of the half in base62.
	for _, h := range [2]uint32{uint32(z >> 32), uint32(z)} {
		b = append(b, base62[h/(62*62)%62], base62[h/62%62], base62[h%62])
	}
	return b
}
