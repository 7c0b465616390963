package surface_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
)

// wireVector is one byte-for-byte vector of semantics §16.2.
type wireVector struct {
	key  surface.WireKey
	name string
}

var wireVectors = []wireVector{
	{surface.WireKey{CapabilityID: "view:devices.table.selectRows"}, "view_devices__table__selectRows"},
	{surface.WireKey{CapabilityID: "domain:devices.disable"}, "domain_devices__disable"},
	{surface.WireKey{CapabilityID: "view:devices.table.readState", InstanceID: "main"}, "view_devices__table__readState_at_main"},
	{surface.WireKey{CapabilityID: "view:at.a.a"}, "view_at__a__a"},
	{
		surface.WireKey{CapabilityID: "view:verylongsegment.verylongsegment.verylongsegment.verylongsegment.tail.someCapabilityName"},
		"view_verylongsegment__verylongsegment__verylongsegment_0_17kbcl7",
	},
	{surface.WireKey{CapabilityID: "domain:readState__0"}, "domain_readState__0_0_1jekgk2"},
}

// The §16.2 collision pair: one level-0 name, two level-1 names.
var (
	wirePairA = surface.WireKey{CapabilityID: "view:aaaaaaaaaa.bbbbbbbbbb.cccccccccc.dddddddddd.eeeeeeeeee.cap8596"}
	wirePairB = surface.WireKey{CapabilityID: "view:aaaaaaaaaa.bbbbbbbbbb.cccccccccc.dddddddddd.eeeeeeeeee.cap2709660"}
)

const (
	wirePairLevel0 = "view_aaaaaaaaaa__bbbbbbbbbb__cccccccccc__dddddddddd__e_0_0kpsgck"
	wirePairNameA  = "view_aaaaaaaaaa__bbbbbbbbbb__cccccccccc__dddddddddd__0_0kzs21j0w"
	wirePairNameB  = "view_aaaaaaaaaa__bbbbbbbbbb__cccccccccc__dddddddddd__0_0kzs21j11"
)

var (
	wireSafeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// wireHashTailRE matches the tail of every hashed name.
	wireHashTailRE = regexp.MustCompile(`_0_([0-9]+|[0-9a-z]{7}|[0-9a-z]{9}|[0-9a-z]{11}|[0-9a-z]{13})$`)
)

// wireRaw is the §16.2 raw form, computed independently of the codec.
func wireRaw(k surface.WireKey) string {
	raw := strings.Replace(k.CapabilityID, ":", "_", 1)
	raw = strings.ReplaceAll(raw, ".", "__")
	if k.InstanceID != "" {
		raw += "_at_" + k.InstanceID
	}
	return raw
}

// wireSpecFaithful is the §16.2 faithful rule plus the codec's two
// additions: the raw form must be in the safe alphabet and must not end like
// a hashed name, and the id must parse.
func wireSpecFaithful(k surface.WireKey) bool {
	raw := wireRaw(k)
	_, ok := surface.ParseCapabilityID(k.CapabilityID)
	return ok && len(raw) <= 64 && !strings.Contains(k.CapabilityID, "_") &&
		wireSafeRE.MatchString(raw) && !wireHashTailRE.MatchString(raw)
}

// wireDecodable reports whether a faithful key decodes: it has no
// instance suffix (per-instance names resolve through the catalog only)
// and its id has only non-empty segments (§16.2: empty segments and runs
// of three or more '_' are refused).
func wireDecodable(k surface.WireKey) bool {
	_, rest, _ := strings.Cut(k.CapabilityID, ":")
	return k.InstanceID == "" && !slices.Contains(strings.Split(rest, "."), "")
}

// wireTB is what checkWireName needs of *testing.T and *rapid.T.
type wireTB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// wireRefHash36 is §16.2 hash36, written out independently of the codec.
func wireRefHash36(s string, n int) string {
	units := utf16.Encode([]rune(s))
	out := ""
	for r := uint32(0); len(out) < n; r++ {
		h := 0x811c9dc5 ^ r
		for _, c := range units {
			h = (h ^ uint32(c)) * 0x01000193
		}
		out += fmt.Sprintf("%07s", strconv.FormatUint(uint64(h), 36))
	}
	return out[:n]
}

// wireRefHashed is the hashed name of k at a level: the first 54, 52, 50 or
// 48 UTF-16 units of the raw form, each outside [A-Za-z0-9_-] shown as '-',
// then "_0_" and the hash.
func wireRefHashed(k surface.WireKey, level int) string {
	hashLen := 7 + 2*level
	var prefix []byte
	for _, u := range utf16.Encode([]rune(wireRaw(k))) {
		if len(prefix) == 61-hashLen {
			break
		}
		if u < utf8.RuneSelf && wireSafeRE.MatchString(string(rune(u))) {
			prefix = append(prefix, byte(u))
		} else {
			prefix = append(prefix, '-')
		}
	}
	return string(prefix) + "_0_" + wireRefHash36(k.CapabilityID+"#"+k.InstanceID+"#"+strconv.Itoa(level), hashLen)
}

func checkWireName(t wireTB, k surface.WireKey, name string) {
	t.Helper()
	if !wireSafeRE.MatchString(name) {
		t.Fatalf("%+v → %q: not 1–64 characters of [A-Za-z0-9_-]", k, name)
	}
}

// AS-ID-002: wire codec — faithful form, safe alphabet, hashed shortening,
// suffix; the §16.2 vectors byte for byte.
func TestWireCodec_AS_ID_002(t *testing.T) {
	t.Run("vectors", func(t *testing.T) {
		for _, v := range wireVectors {
			if got := surface.EncodeWireName(v.key); got != v.name {
				t.Errorf("EncodeWireName(%+v) = %q, want %q", v.key, got, v.name)
			}
		}
		for _, k := range []surface.WireKey{wirePairA, wirePairB} {
			if got := surface.EncodeWireName(k); got != wirePairLevel0 {
				t.Errorf("EncodeWireName(%+v) = %q, want %q", k, got, wirePairLevel0)
			}
		}
	})
	t.Run("faithful", func(t *testing.T) {
		// Faithful names without a suffix decode to their id; a
		// per-instance name decodes to none (AS-WIRE-007).
		for _, v := range wireVectors[:4] {
			id, ok := surface.DecodeWireName(v.name)
			if v.key.InstanceID != "" {
				if ok {
					t.Errorf("DecodeWireName(%q) = %q, want a refusal (per-instance name)", v.name, id)
				}
				continue
			}
			if !ok || id != v.key.CapabilityID {
				t.Errorf("DecodeWireName(%q) = %q, %v; want %q", v.name, id, ok, v.key.CapabilityID)
			}
		}
		// Exactly 64 characters is still faithful.
		k := surface.WireKey{CapabilityID: "view:" + strings.Repeat("a", 56) + ".b"}
		if n := surface.EncodeWireName(k); n != wireRaw(k) || len(n) != 64 {
			t.Errorf("64-character raw form: got %q", n)
		}
	})
	t.Run("hashed", func(t *testing.T) {
		for _, k := range []surface.WireKey{
			{CapabilityID: "view:" + strings.Repeat("a", 57) + ".b"}, // 65
			{CapabilityID: "domain:snake_case"},                      // '_' in the id
			{CapabilityID: "domain:mail/archive"},                    // unsafe character
			{CapabilityID: "domain:über.straße"},                     // non-ASCII
			{CapabilityID: "domain:a:b"},                             // second ':'
			{CapabilityID: "view:Bad.x"},                             // unparseable
			{CapabilityID: "view:x.y", InstanceID: "a b"},            // invalid instance
			{CapabilityID: "view:x.y", InstanceID: "i_0_1234567"},    // ends like a hash
			{CapabilityID: "view:x.y", InstanceID: "i_0_42"},         // ends like a rank
			{CapabilityID: "view:x.y", InstanceID: strings.Repeat("i", 128)},
			{CapabilityID: ""},
		} {
			n := surface.EncodeWireName(k)
			checkWireName(t, k, n)
			if !wireHashTailRE.MatchString(n) || len(n) < 10 || !strings.HasSuffix(n[:len(n)-7], "_0_") {
				t.Errorf("EncodeWireName(%+v) = %q, want a level-0 hashed name", k, n)
			}
			if _, ok := surface.DecodeWireName(n); ok {
				t.Errorf("hashed name %q decodes", n)
			}
		}
		if got, want := surface.EncodeWireName(surface.WireKey{CapabilityID: "domain:mail/archive"}), "domain_mail-archive_0_"; !strings.HasPrefix(got, want) {
			t.Errorf("unsafe characters: got %q, want prefix %q", got, want)
		}
		// The hash covers the instance id.
		a := surface.EncodeWireName(surface.WireKey{CapabilityID: "domain:a_b", InstanceID: "x"})
		b := surface.EncodeWireName(surface.WireKey{CapabilityID: "domain:a_b", InstanceID: "y"})
		if a == b {
			t.Errorf("instance ids x and y share %q", a)
		}
	})
	t.Run("suffix", func(t *testing.T) {
		for _, c := range []struct {
			key  surface.WireKey
			name string
		}{
			{surface.WireKey{CapabilityID: "view:x.at", InstanceID: "at"}, "view_x__at_at_at"},
			{surface.WireKey{CapabilityID: "view:at.at", InstanceID: "_at_"}, "view_at__at_at__at_"},
			{surface.WireKey{CapabilityID: "domain:devices.disable", InstanceID: "reg_0001k3XbQ9"}, "domain_devices__disable_at_reg_0001k3XbQ9"},
			{surface.WireKey{CapabilityID: "domain:q", InstanceID: "a___b"}, "domain_q_at_a___b"},
			{surface.WireKey{CapabilityID: "domain:q", InstanceID: "-"}, "domain_q_at_-"},
		} {
			if got := surface.EncodeWireName(c.key); got != c.name {
				t.Errorf("EncodeWireName(%+v) = %q, want %q", c.key, got, c.name)
			}
			if id, ok := surface.DecodeWireName(c.name); ok { // only the catalog's map resolves it
				t.Errorf("DecodeWireName(%q) = %q, want a refusal (per-instance name)", c.name, id)
			}
		}
	})
}

// Generators.

func wireViewID() *rapid.Generator[string] {
	seg := rapid.StringMatching(`[a-z][a-z0-9-]{0,12}`)
	return rapid.Custom(func(t *rapid.T) string {
		segs := rapid.SliceOfN(seg, 1, 5).Draw(t, "segs")
		name := rapid.StringMatching(`[a-z][A-Za-z0-9]{0,24}`).Draw(t, "name")
		id := "view:" + strings.Join(segs, ".") + "." + name
		if len(id) > surface.MaxIDLength {
			id = id[:surface.MaxIDLength]
			id = id[:strings.LastIndexByte(id, '.')] + ".x"
		}
		return id
	})
}

func wireDomainID() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		var path string
		if rapid.IntRange(0, 4).Draw(t, "wild") == 0 {
			// Opaque paths: anything non-empty, '_' and ':' included.
			path = rapid.StringOfN(rapid.OneOf(rapid.RuneFrom([]rune("._:-aZ9#/ é😀")), rapid.Rune()), 1, 40, -1).Draw(t, "path")
		} else {
			path = strings.Join(rapid.SliceOfN(rapid.StringMatching(`[A-Za-z0-9-]{1,14}`), 1, 5).Draw(t, "segs"), ".")
		}
		id := "domain:" + path
		for len(id) > surface.MaxIDLength {
			_, size := utf8.DecodeLastRuneInString(id)
			id = id[:len(id)-size]
		}
		return id
	})
}

func wireInstanceID() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.Just(""),
		rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`),
		rapid.StringMatching(`[A-Za-z0-9_-]{1,128}`),
		rapid.StringMatching(`[a-z]{1,5}_0_([0-9]{1,3}|[0-9a-z]{7})`), // ends like a hash
		rapid.Just("reg_0001k3XbQ9"),
	)
}

func wireKey() *rapid.Generator[surface.WireKey] {
	return rapid.Custom(func(t *rapid.T) surface.WireKey {
		id := rapid.OneOf(wireViewID(), wireDomainID()).Draw(t, "id")
		return surface.WireKey{CapabilityID: id, InstanceID: wireInstanceID().Draw(t, "instance")}
	})
}

// AS-ID-004: property — the wire codec round-trips within limits: names are
// at most 64 characters of [A-Za-z0-9_-]; faithful names decode to their
// key; hashed names never decode.
func TestWireRoundTrip_AS_ID_004(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := wireKey().Draw(t, "key")
		if _, ok := surface.ParseCapabilityID(k.CapabilityID); !ok {
			t.Fatalf("generator made an unparseable id %q", k.CapabilityID)
		}
		n := surface.EncodeWireName(k)
		checkWireName(t, k, n)
		raw := wireRaw(k)
		if wireSpecFaithful(k) {
			if n != raw {
				t.Fatalf("%+v: got %q, want the faithful form %q", k, n, raw)
			}
			got, ok := surface.DecodeWireName(n)
			if wireDecodable(k) && (!ok || got != k.CapabilityID) {
				t.Fatalf("DecodeWireName(%q) = %q, %v; want %q", n, got, ok, k.CapabilityID)
			}
			if !wireDecodable(k) && ok {
				t.Fatalf("DecodeWireName(%q) = %q, want a refusal (empty segment or suffix)", n, got)
			}
			return
		}
		if n == raw || !wireHashTailRE.MatchString(n) {
			t.Fatalf("%+v: got %q, want a hashed name", k, n)
		}
		if got, ok := surface.DecodeWireName(n); ok {
			t.Fatalf("hashed name %q decodes to %+v", n, got)
		}
		if want := wireRefHashed(k, 0); n != want {
			t.Fatalf("%+v: got %q, want %q", k, n, want)
		}
		if len(utf16.Encode([]rune(raw))) >= 54 && len(n) != 64 {
			t.Fatalf("%+v: hashed name %q is %d long, want 64", k, n, len(n))
		}
	})
}

// AS-WIRE-004: wire names are at most 64 characters, at every level and
// after ranking.
func TestWireLength_AS_WIRE_004(t *testing.T) {
	long := "view:" + strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + ".c" // 128
	if len(long) != surface.MaxIDLength {
		t.Fatalf("test id is %d long", len(long))
	}
	keys := []surface.WireKey{
		{CapabilityID: long},
		{CapabilityID: long, InstanceID: strings.Repeat("i", 128)},
		{CapabilityID: "domain:" + strings.Repeat("é", 60)},
		{CapabilityID: "domain:" + strings.Repeat("😀", 30)},
		// Identical hash inputs and prefixes at every level: only ranks
		// separate them.
		{CapabilityID: "domain:" + strings.Repeat("p", 60) + "#q"},
		{CapabilityID: "domain:" + strings.Repeat("p", 60), InstanceID: "q#"},
		{CapabilityID: "domain:" + strings.Repeat("z", 60) + "\xff"},
		{CapabilityID: "domain:" + strings.Repeat("z", 60) + "\xfe"},
		wirePairA, wirePairB,
	}
	for _, k := range keys {
		checkWireName(t, k, surface.EncodeWireName(k))
	}
	names := surface.AssignWireNames(keys)
	if len(names) != len(keys) {
		t.Fatalf("got %d names for %d keys", len(names), len(keys))
	}
	seen := map[string]surface.WireKey{}
	for k, n := range names {
		checkWireName(t, k, n)
		if o, dup := seen[n]; dup {
			t.Fatalf("%+v and %+v share %q", o, k, n)
		}
		seen[n] = k
	}
	// The ranked pairs end in "_0_<rank>".
	for _, k := range keys[4:8] {
		if n := names[k]; !regexp.MustCompile(`_0_[0-9]$`).MatchString(n) {
			t.Errorf("%+v → %q, want a ranked name", k, n)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfN(wireKey(), 0, 40).Draw(t, "keys")
		for k, n := range surface.AssignWireNames(keys) {
			checkWireName(t, k, n)
		}
	})
}

// AS-WIRE-005: property — assignment is deterministic and independent of
// the order (and repetition) of keys.
func TestWireDeterministic_AS_WIRE_005(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfN(wireKey(), 0, 30).Draw(t, "keys")
		if rapid.Bool().Draw(t, "pair") {
			keys = append(keys, wirePairA, wirePairB)
		}
		want := surface.AssignWireNames(keys)
		again := surface.AssignWireNames(keys)
		perm := rapid.Permutation(keys).Draw(t, "perm")
		if n := rapid.IntRange(0, len(perm)).Draw(t, "dups"); n > 0 {
			perm = append(perm, perm[:n]...) // repeated keys are one key
		}
		shuffled := surface.AssignWireNames(perm)
		for _, got := range []map[surface.WireKey]string{again, shuffled} {
			if len(got) != len(want) {
				t.Fatalf("got %d names, want %d", len(got), len(want))
			}
			for k, n := range want {
				if got[k] != n {
					t.Fatalf("%+v: %q vs %q", k, got[k], n)
				}
			}
		}
	})
}

// AS-WIRE-006: names are unique per catalog, including the §16.2 collision
// pair, keys differing only in instance id, and crafted keys that collide at
// every level.
func TestWireUnique_AS_WIRE_006(t *testing.T) {
	t.Run("collision pair", func(t *testing.T) {
		names := surface.AssignWireNames([]surface.WireKey{wirePairB, wirePairA})
		if names[wirePairA] != wirePairNameA || names[wirePairB] != wirePairNameB {
			t.Errorf("got %q / %q, want %q / %q", names[wirePairA], names[wirePairB], wirePairNameA, wirePairNameB)
		}
		if wireRefHashed(wirePairA, 1) != wirePairNameA || wireRefHashed(wirePairA, 0) != wirePairLevel0 {
			t.Errorf("the reference hash disagrees with §16.2")
		}
		// Keys that do not collide keep their level-0 names.
		other := surface.WireKey{CapabilityID: "view:aaaaaaaaaa.bbbbbbbbbb.cccccccccc.dddddddddd.eeeeeeeeee.cap1"}
		names = surface.AssignWireNames([]surface.WireKey{wirePairA, other, wirePairB})
		if names[other] != surface.EncodeWireName(other) || names[wirePairA] != wirePairNameA {
			t.Errorf("got %v", names)
		}
	})
	t.Run("instances", func(t *testing.T) {
		id := "domain:devices.disable"
		keys := []surface.WireKey{{CapabilityID: id}, {CapabilityID: id, InstanceID: "main"}, {CapabilityID: id, InstanceID: "main2"}}
		names := surface.AssignWireNames(keys)
		for _, k := range keys {
			if names[k] != wireRaw(k) {
				t.Errorf("%+v → %q, want %q", k, names[k], wireRaw(k))
			}
		}
	})
	t.Run("property", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			keys := rapid.SliceOfN(wireKey(), 0, 60).Draw(t, "keys")
			// Crafted collisions: the §16.2 pair; one long id under several
			// instance ids (one hashed prefix); an id that differs from
			// another only in an instance id.
			long := rapid.SampledFrom([]string{
				"view:" + strings.Repeat("x", 60) + ".y",
				"domain:" + strings.Repeat("long-", 20),
			}).Draw(t, "long")
			for _, inst := range rapid.SliceOfN(wireInstanceID(), 1, 8).Draw(t, "instances") {
				keys = append(keys, surface.WireKey{CapabilityID: long, InstanceID: inst})
			}
			k := wireKey().Draw(t, "twin")
			keys = append(keys, k, surface.WireKey{CapabilityID: k.CapabilityID, InstanceID: k.InstanceID + "2"})
			keys = append(keys, wirePairA, wirePairB,
				surface.WireKey{CapabilityID: "domain:p#q"}, surface.WireKey{CapabilityID: "domain:p", InstanceID: "q#"})
			names := surface.AssignWireNames(keys)
			seen := map[string]surface.WireKey{}
			for _, k := range keys {
				n, ok := names[k]
				if !ok {
					t.Fatalf("no name for %+v", k)
				}
				checkWireName(t, k, n)
				if o, dup := seen[n]; dup && o != k {
					t.Fatalf("%+v and %+v share %q", o, k, n)
				}
				seen[n] = k
			}
			if len(seen) != len(names) {
				t.Fatalf("%d names for %d distinct keys", len(seen), len(names))
			}
		})
	})
}

// AS-WIRE-007: the catalog map round-trips; decoding refuses rather than
// guesses.
func TestWireDecodeRefuses_AS_WIRE_007(t *testing.T) {
	for _, name := range []string{
		"",
		"view",
		"view_",
		"view___x",
		"view_a___b",
		"view_a____b",
		"view_a__",
		"view__a__b",
		"view_a_b",           // a leftover '_'
		"view_a__b_",         // a leftover '_'
		"view_a__b_at_",      // empty instance
		"view_a__b_at",       // a leftover '_'
		"view_a__b_x_at_y",   // a leftover '_' before the suffix
		"view_a___at_y",      // a run of three
		"view_at_x",          // no id before the suffix
		"view_x__at_y",       // "at" is a segment; "_y" is a leftover
		"view_A__b",          // unparseable type
		"view_a__B",          // unparseable name
		"view_a",             // view id without a name
		"view_a__b-c",        // '-' in a capability name
		"other_a__b",         // unknown plane
		"View_a__b",          // plane is case-sensitive
		"domain_",            // empty path
		"domain___x",         // leading empty segment
		"domain_x_0_1jekgk2", // ends like a hash
		"domain_q_at_y_0_123",
		"domain_readState__0_0_1jekgk2",
		"view_verylongsegment__verylongsegment__verylongsegment_0_17kbcl7",
		wirePairLevel0, wirePairNameA, wirePairNameB,
		"view_a__b_at_x.y",                        // unsafe character
		"view_a__b_at_" + strings.Repeat("i", 60), // longer than 64
		"domain_a.b",                              // '.' is not in the alphabet
		"domain_é",
	} {
		if k, ok := surface.DecodeWireName(name); ok {
			t.Errorf("DecodeWireName(%q) = %+v, want a refusal", name, k)
		}
	}
	// Names whose decoded key re-encodes differently: the id would parse,
	// but its faithful form is longer than 64 or looks hashed.
	for _, name := range []string{
		"domain_" + strings.Repeat("a__", 19) + "bbb", // 67 > 64
	} {
		if k, ok := surface.DecodeWireName(name); ok {
			t.Errorf("DecodeWireName(%q) = %+v, want a refusal", name, k)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfN(wireKey(), 0, 40).Draw(t, "keys")
		keys = append(keys, wirePairA, wirePairB)
		names := surface.AssignWireNames(keys)
		inverse := make(map[string]surface.WireKey, len(names))
		for k, n := range names {
			inverse[n] = k
		}
		if len(inverse) != len(names) {
			t.Fatalf("the map does not invert: %d names for %d keys", len(inverse), len(names))
		}
		for n, k := range inverse {
			if names[k] != n {
				t.Fatalf("inverse[%q] = %+v, whose name is %q", n, k, names[k])
			}
			got, ok := surface.DecodeWireName(n)
			if ok && (got != k.CapabilityID || k.InstanceID != "") {
				t.Fatalf("DecodeWireName(%q) = %q, but the catalog says %+v", n, got, k)
			}
			if ok != (n == wireRaw(k) && wireDecodable(k)) {
				t.Fatalf("DecodeWireName(%q) ok=%v for %+v", n, ok, k)
			}
		}
	})
}

// FuzzDecodeWireName: arbitrary strings never panic, and a decoded key
// encodes back to the name byte for byte.
func FuzzDecodeWireName(f *testing.F) {
	for _, v := range wireVectors {
		f.Add(v.name)
	}
	for _, s := range []string{
		"view___x", "view_a___b", "view_", "other_a__b", "view_a__", "view_A__b",
		"view_x__at_at_at", "domain_q_at_a___b", "domain_q_at_y_0_1234567", wirePairNameA,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		id, ok := surface.DecodeWireName(name)
		if !ok {
			if id != "" {
				t.Fatalf("refusal with an id %q", id)
			}
			return
		}
		k := surface.WireKey{CapabilityID: id}
		if got := surface.EncodeWireName(k); got != name {
			t.Fatalf("DecodeWireName(%q) = %+v, which encodes to %q", name, k, got)
		}
		if names := surface.AssignWireNames([]surface.WireKey{k}); names[k] != name {
			t.Fatalf("AssignWireNames gives %+v %q, want %q", k, names[k], name)
		}
	})
}

// FuzzEncodeWireName: any key gets a safe name of at most 64 characters,
// and the name decodes to nothing or to the key itself.
func FuzzEncodeWireName(f *testing.F) {
	for _, v := range wireVectors {
		f.Add(v.key.CapabilityID, v.key.InstanceID)
	}
	f.Add("domain:p#q", "")
	f.Add("domain:q", "y_0_1234567")
	f.Fuzz(func(t *testing.T, id, instance string) {
		k := surface.WireKey{CapabilityID: id, InstanceID: instance}
		n := surface.EncodeWireName(k)
		checkWireName(t, k, n)
		if got, ok := surface.DecodeWireName(n); ok && (got != k.CapabilityID || k.InstanceID != "") {
			t.Fatalf("%+v → %q → %q", k, n, got)
		}
	})
}

// BenchmarkAssignWireNames names a 300-tool catalog: views of several
// component types (some suffixed by instance), procedures, and long ids
// that hash, including the §16.2 collision pair.
func BenchmarkAssignWireNames(b *testing.B) {
	keys := make([]surface.WireKey, 0, 300)
	for i := 0; len(keys) < 298; i++ {
		typ := "devices.table" + strconv.Itoa(i%20)
		switch i % 4 {
		case 0:
			keys = append(keys, surface.WireKey{CapabilityID: surface.ViewID(typ, "selectRows"+strconv.Itoa(i))})
		case 1:
			keys = append(keys, surface.WireKey{CapabilityID: surface.ViewID(typ, "readState"), InstanceID: "inst" + strconv.Itoa(i)})
		case 2:
			keys = append(keys, surface.WireKey{CapabilityID: "domain:devices.op" + strconv.Itoa(i), InstanceID: "reg_0001k3XbQ9"})
		default:
			keys = append(keys, surface.WireKey{CapabilityID: surface.ViewID(strings.Repeat("verylongsegment.", 4)+"t"+strconv.Itoa(i), "someCapabilityName")})
		}
	}
	keys = append(keys, wirePairA, wirePairB)
	b.ReportAllocs()
	for b.Loop() {
		if names := surface.AssignWireNames(keys); len(names) != len(keys) {
			b.Fatalf("%d names", len(names))
		}
	}
}

func ExampleAssignWireNames() {
	names := surface.AssignWireNames([]surface.WireKey{
		{CapabilityID: "view:devices.table.readState", InstanceID: "main"},
		{CapabilityID: "view:devices.table.readState", InstanceID: "side"},
		{CapabilityID: "domain:devices.disable"},
	})
	for _, k := range []surface.WireKey{
		{CapabilityID: "view:devices.table.readState", InstanceID: "main"},
		{CapabilityID: "view:devices.table.readState", InstanceID: "side"},
		{CapabilityID: "domain:devices.disable"},
	} {
		fmt.Println(names[k])
	}
	fmt.Println(surface.DecodeWireName("domain_devices__disable"))
	fmt.Println(surface.DecodeWireName("view_devices__table__readState_at_main")) // resolved through the catalog only
	// Output:
	// view_devices__table__readState_at_main
	// view_devices__table__readState_at_side
	// domain_devices__disable
	// domain:devices.disable true
	//  false
}
