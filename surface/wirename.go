package surface

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// Wire names (semantics §16.2).
//
// A tool name is derived from a capability id and, when several tools would
// otherwise share it, an instance id. The faithful form spells the key out:
// the first ':' becomes '_', each '.' becomes "__", and a suffix is "_at_"
// followed by the raw instance id:
//
//	view:devices.table.readState @ main → view_devices__table__readState_at_main
//
// A key whose faithful form would be longer than [maxWireNameLength], whose
// id contains '_' (which would make the form ambiguous), or whose form would
// leave the safe alphabet [A-Za-z0-9_-] is hashed instead: a readable prefix
// of the form, then "_0_" and a base-36 hash of the key.
//
// Two rules go beyond the letter of §16.2 so that every emitted name is a
// valid tool name for OpenAI and MCP alike and a hashed name can never be
// read back as a different key:
//
//   - a key whose faithful form would contain a character outside
//     [A-Za-z0-9_-] (possible only with an opaque domain path or an invalid
//     instance id) or whose id does not parse is hashed, and the kept prefix
//     has each such character replaced by '-';
//   - a key whose faithful form would end like a hashed name ("_0_" then 7,
//     9, 11 or 13 characters of [0-9a-z], or "_0_" then decimal digits; only
//     an instance id ending that way can do this) is hashed, so faithful and
//     hashed names are disjoint.

// maxWireNameLength is the longest tool name the codec emits. It is the
// OpenAI limit; MCP allows 128.
const maxWireNameLength = 64

// wireKey identifies one tool of a catalog: a capability id plus the
// instance id that disambiguates it ("" when the name needs no suffix).
//
// The toolset chooses InstanceID (semantics §16.1; see catalog). Distinct
// tools need distinct keys, since [assignWireNames] gives equal keys one
// name.
type wireKey struct {
	CapabilityID string
	InstanceID   string
}

// Codec constants.
const (
	wireHashMarker = "_0_"
	wireSuffix     = "_at_"
	// wireRounds is the number of collision rounds of assignWireNames.
	wireRounds = 4
)

// encodeWireName returns the wire name of one key at a hash level (§16.2;
// level 0 unless collisions raised it): the faithful form when the key has
// one, at every level, else the hashed form. The result has at most
// [maxWireNameLength] characters, all in [A-Za-z0-9_-].
//
// A catalog must name its tools with [assignWireNames], which resolves the
// (rare) collisions between hashed names.
func encodeWireName(k wireKey, level int) string {
	raw := wireRaw(k)
	if wireFaithful(k, raw) {
		return raw
	}
	return wirePrefix(raw, wireKeep(level)) + wireHashMarker +
		wireHash36(k.CapabilityID+"#"+k.InstanceID+"#"+strconv.Itoa(level), wireHashLen(level))
}

// wireHashLen is the hash length at a level: 7, 9, 11, 13.
func wireHashLen(level int) int { return 7 + 2*level }

// wireKeep is the length of the kept prefix at a level: 54, 52, 50, 48.
func wireKeep(level int) int {
	return maxWireNameLength - len(wireHashMarker) - wireHashLen(level)
}

// wireRaw is the unabridged form: the first ':' → '_', each '.' → "__",
// plus "_at_" + instance id when there is one.
func wireRaw(k wireKey) string {
	raw := strings.ReplaceAll(strings.Replace(k.CapabilityID, ":", "_", 1), ".", "__")
	if k.InstanceID != "" {
		raw += wireSuffix + k.InstanceID
	}
	return raw
}

// wireFaithful reports whether raw, the raw form of k, is k's name.
func wireFaithful(k wireKey, raw string) bool {
	if len(raw) > maxWireNameLength || strings.IndexByte(k.CapabilityID, '_') >= 0 ||
		!wireSafe(raw) || wireLooksHashed(raw) {
		return false
	}
	_, ok := parseCapabilityID(k.CapabilityID)
	return ok
}

// wirePrefix returns the first keep UTF-16 code units of raw (the spec's
// raw[:keep]) with every unit outside the safe alphabet replaced by '-':
// a supplementary character becomes "--", an invalid UTF-8 byte '-'.
func wirePrefix(raw string, keep int) string {
	if wireSafe(raw) {
		return raw[:min(keep, len(raw))]
	}
	b := make([]byte, 0, keep)
	for _, r := range raw {
		switch {
		case r < utf8.RuneSelf && wireSafeByte(byte(r)):
			b = append(b, byte(r))
		case r >= 0x10000:
			b = append(b, "--"...)
		default:
			b = append(b, '-')
		}
		if len(b) >= keep {
			break
		}
	}
	return string(b[:min(keep, len(b))])
}

// wireHash36 is the §16.2 hash: rounds r = 0, 1, …, each a 32-bit FNV-1a
// over the UTF-16 code units of s with offset basis 0x811c9dc5 XOR r,
// formatted in lowercase base 36 zero-padded to 7; the first n characters
// of the concatenation.
func wireHash36(s string, n int) string {
	out := make([]byte, 0, n+7)
	var digits [16]byte
	for r := uint32(0); len(out) < n; r++ {
		h := uint32(0x811c9dc5) ^ r
		for _, c := range s { // invalid UTF-8 reads as U+FFFD
			if c >= 0x10000 {
				hi, lo := utf16.EncodeRune(c)
				h = (h ^ uint32(hi)) * 0x01000193
				h = (h ^ uint32(lo)) * 0x01000193
				continue
			}
			h = (h ^ uint32(c)) * 0x01000193
		}
		d := strconv.AppendUint(digits[:0], uint64(h), 36)
		for i := len(d); i < 7; i++ {
			out = append(out, '0')
		}
		out = append(out, d...)
	}
	return string(out[:n])
}

func wireSafeByte(c byte) bool {
	return isAlnum(c) || c == '_' || c == '-'
}

// wireSafe reports whether s uses only [A-Za-z0-9_-].
func wireSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !wireSafeByte(s[i]) {
			return false
		}
	}
	return true
}

// wireLooksHashed reports whether name ends like a hashed name: "_0_" then
// 7, 9, 11 or 13 characters of [0-9a-z] (levels 0–3), or "_0_" then
// decimal digits (a rank).
func wireLooksHashed(name string) bool {
	i := strings.LastIndex(name, wireHashMarker)
	if i < 0 {
		return false
	}
	tail := name[i+len(wireHashMarker):]
	if tail == "" || strings.Trim(tail, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		return false
	}
	switch len(tail) {
	case 7, 9, 11, 13:
		return true
	}
	return strings.Trim(tail, "0123456789") == ""
}

// assignWireNames assigns unique names to a catalog's keys by the §16.2
// catalog algorithm. Every key is encoded at level 0; then, for up to four
// rounds, keys sharing a name with another key collide: rounds 0–2 raise
// each colliding key one hash level (longer hash, shorter prefix) and
// re-encode it; round 3 replaces each colliding name's "_0_<hash>" tail with
// "_0_<rank>", rank being the key's index among all colliding keys sorted by
// "id#instanceId". Faithful names never collide, so only hashed names move.
//
// Equal keys are one key and get one name. The result is deterministic and
// independent of the order of keys; every name has at most
// [maxWireNameLength] characters in [A-Za-z0-9_-], and distinct keys get
// distinct names, so the map inverts. A rank that would reuse a name
// already taken (possible only for crafted keys) moves on to the next rank.
func assignWireNames(keys []wireKey) map[wireKey]string {
	sorted := make([]wireSortKey, len(keys))
	for i, k := range keys {
		sorted[i] = wireSortKey{&keys[i], k.CapabilityID + "#" + k.InstanceID}
	}
	slices.SortFunc(sorted, wireSortKey.compare)
	sorted = slices.CompactFunc(sorted, func(a, b wireSortKey) bool { return *a.key == *b.key })
	uniq := make([]wireKey, len(sorted))
	for i, s := range sorted {
		uniq[i] = *s.key
	}

	names := make([]string, len(uniq))
	levels := make([]int, len(uniq))
	for i, k := range uniq {
		names[i] = encodeWireName(k, 0)
	}
	count := make(map[string]int, len(uniq))
	var colliding []int
	for round := 0; round < wireRounds; round++ {
		clear(count)
		for _, n := range names {
			count[n]++
		}
		colliding = colliding[:0]
		for i, n := range names { // uniq is sorted, so colliding is too
			if count[n] > 1 {
				colliding = append(colliding, i)
			}
		}
		if len(colliding) == 0 {
			break
		}
		if round < wireRounds-1 {
			for _, i := range colliding {
				levels[i]++
				names[i] = encodeWireName(uniq[i], levels[i])
			}
			continue
		}
		// Round 3: ranks. Names no collision touched stay; each rank
		// name is checked against them and against earlier ranks.
		taken := make(map[string]bool, len(names))
		for _, n := range names {
			if count[n] == 1 {
				taken[n] = true
			}
		}
		rank := 0
		for _, i := range colliding {
			// The name without its "_0_<hash>" tail.
			prefix := wirePrefix(wireRaw(uniq[i]), wireKeep(levels[i]))
			for {
				r := strconv.Itoa(rank)
				n := prefix[:min(len(prefix), maxWireNameLength-len(wireHashMarker)-len(r))] +
					wireHashMarker + r
				rank++
				if !taken[n] {
					taken[n] = true
					names[i] = n
					break
				}
			}
		}
	}
	out := make(map[wireKey]string, len(uniq))
	for i, k := range uniq {
		out[k] = names[i]
	}
	return out
}

// wireSortKey is a key with its catalog key "id#instanceId".
type wireSortKey struct {
	key *wireKey
	str string
}

// compare orders keys by catalog key in UTF-16 code-unit order (the
// reference sorts JavaScript strings; an invalid UTF-8 byte reads as
// U+FFFD, as in canonical JSON), then by the bytes of id and instance id,
// so that distinct keys never compare equal.
func (a wireSortKey) compare(b wireSortKey) int {
	return cmp.Or(
		canonical.CompareUTF16(a.str, b.str),
		strings.Compare(a.key.CapabilityID, b.key.CapabilityID),
		strings.Compare(a.key.InstanceID, b.key.InstanceID),
	)
}

// decodeWireName maps a faithful name without an instance suffix back to
// its capability id (semantics §16.2). It reports false rather than guess:
// for hashed names and per-instance names ("…_at_main"), which only the
// catalog that emitted them can resolve (hosts use the catalog's map,
// Catalog.WireNames), and for anything that is not exactly the name
// [encodeWireName] gives some id.
//
// The plane is the text before the first '_' ("view" or "domain"); the
// rest is segments separated by exactly "__" (each → '.'). Runs of one or
// of three or more '_' (a leftover '_', a suffix), empty segments, names
// ending like a hash, unparseable ids, and ids that do not re-encode byte
// for byte are refused.
func decodeWireName(name string) (capabilityID string, ok bool) {
	if name == "" || len(name) > maxWireNameLength || !wireSafe(name) || wireLooksHashed(name) {
		return "", false
	}
	plane, rest, found := strings.Cut(name, "_")
	if !found || plane != string(PlaneView) && plane != string(PlaneDomain) {
		return "", false
	}
	segs := strings.Split(rest, "__")
	// An empty segment, a leftover '_' or a run of three or more.
	if slices.ContainsFunc(segs, func(seg string) bool { return seg == "" || strings.Contains(seg, "_") }) {
		return "", false
	}
	id := plane + ":" + strings.Join(segs, ".")
	if _, ok := parseCapabilityID(id); !ok || encodeWireName(wireKey{CapabilityID: id}, 0) != name {
		return "", false
	}
	return id, true
}
