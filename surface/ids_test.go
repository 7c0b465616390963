package surface_test

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentsurface/agentsurface/surface"
)

// AS-ID-001: grammar accept/reject; unambiguous parsing.
func TestIDGrammar_AS_ID_001(t *testing.T) {
	types := []struct {
		s  string
		ok bool
	}{
		{"devices", true}, {"devices.table", true}, {"a.b-c.d9", true}, {"x-1.y", true},
		{"", false}, {"Devices", false}, {"devices.", false}, {".devices", false},
		{"devices..table", false}, {"1devices", false}, {"dev_ices", false},
		{"devices.Table", false}, {"-dev", false}, {"dev ices", false},
		{strings.Repeat("a", 128), true}, {strings.Repeat("a", 129), false},
	}
	for _, c := range types {
		if got := surface.ValidComponentType(c.s); got != c.ok {
			t.Errorf("ValidComponentType(%q) = %v, want %v", c.s, got, c.ok)
		}
	}
	names := []struct {
		s  string
		ok bool
	}{
		{"readState", true}, {"a", true}, {"select2Rows", true},
		{"", false}, {"ReadState", false}, {"read-state", false}, {"read_state", false},
		{"read.state", false}, {"9read", false},
	}
	for _, c := range names {
		if got := surface.ValidCapabilityName(c.s); got != c.ok {
			t.Errorf("ValidCapabilityName(%q) = %v, want %v", c.s, got, c.ok)
		}
	}
	instances := []struct {
		s  string
		ok bool
	}{
		{"default", true}, {"main", true}, {"A_b-9", true},
		{"", false}, {"a.b", false}, {"a b", false}, {"é", false},
		{strings.Repeat("i", 128), true}, {strings.Repeat("i", 129), false},
	}
	for _, c := range instances {
		if got := surface.ValidInstanceID(c.s); got != c.ok {
			t.Errorf("ValidInstanceID(%q) = %v, want %v", c.s, got, c.ok)
		}
	}

	ids := []struct {
		s    string
		ok   bool
		want surface.ParsedID
	}{
		{"view:devices.table.selectRows", true, surface.ParsedID{Plane: surface.PlaneView, Type: "devices.table", Name: "selectRows"}},
		{"view:at.a.a", true, surface.ParsedID{Plane: surface.PlaneView, Type: "at.a", Name: "a"}},
		{"domain:devices.disable", true, surface.ParsedID{Plane: surface.PlaneDomain, Path: "devices.disable"}},
		{"domain:readState__0", true, surface.ParsedID{Plane: surface.PlaneDomain, Path: "readState__0"}},
		{"domain:", false, surface.ParsedID{}},
		{"view:devices", false, surface.ParsedID{}},
		{"view:devices.", false, surface.ParsedID{}},
		{"view:.readState", false, surface.ParsedID{}},
		{"view:devices.table.select_rows", false, surface.ParsedID{}},
		{"view:devices.table.SelectRows", false, surface.ParsedID{}},
		{"View:devices.table.selectRows", false, surface.ParsedID{}},
		{"devices.table.selectRows", false, surface.ParsedID{}},
		{"meta:surface.discover", false, surface.ParsedID{}},
		{"", false, surface.ParsedID{}},
		{"domain:" + strings.Repeat("p", 121), true, surface.ParsedID{Plane: surface.PlaneDomain, Path: strings.Repeat("p", 121)}},
		{"domain:" + strings.Repeat("p", 122), false, surface.ParsedID{}}, // 129 long
	}
	for _, c := range ids {
		got, ok := surface.ParseCapabilityID(c.s)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseCapabilityID(%q) = %+v, %v; want %+v, %v", c.s, got, ok, c.want, c.ok)
		}
	}
}

func genSegment(t *rapid.T, label string) string {
	return rapid.StringMatching(`[a-z][a-z0-9-]{0,8}`).Draw(t, label)
}

// AS-ID-003: property — ids round-trip parse/format.
func TestIDRoundTrip_AS_ID_003(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		segs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string { return genSegment(t, "seg") }), 1, 5).Draw(t, "segments")
		typ := strings.Join(segs, ".")
		name := rapid.StringMatching(`[a-z][A-Za-z0-9]{0,12}`).Draw(t, "name")
		id := surface.ViewID(typ, name)
		parsed, ok := surface.ParseCapabilityID(id)
		if len(id) > surface.MaxIDLength {
			if ok {
				t.Fatalf("over-long id %q parsed", id)
			}
			return
		}
		if !ok || parsed.Type != typ || parsed.Name != name || parsed.String() != id {
			t.Fatalf("ParseCapabilityID(%q) = %+v, %v", id, parsed, ok)
		}

		path := rapid.StringMatching(`[A-Za-z0-9_.:-]{1,40}`).Draw(t, "path")
		did := "domain:" + path
		dp, ok := surface.ParseCapabilityID(did)
		if !ok || dp.Path != path || dp.String() != did {
			t.Fatalf("ParseCapabilityID(%q) = %+v, %v", did, dp, ok)
		}

		// Anything that parses formats back to itself.
		s := rapid.String().Draw(t, "arbitrary")
		if p, ok := surface.ParseCapabilityID(s); ok && p.String() != s {
			t.Fatalf("ParseCapabilityID(%q).String() = %q", s, p.String())
		}
	})
}

func TestConsumerKey(t *testing.T) {
	if got := (surface.Consumer{}).Key(); got != "embedded:anonymous" {
		t.Errorf("zero consumer key = %q", got)
	}
	if got := (surface.Consumer{ID: "s1", Kind: surface.ConsumerMCPBridge}).Key(); got != "mcp-bridge:s1" {
		t.Errorf("key = %q", got)
	}
}

func TestMintedIDs(t *testing.T) {
	reg := surface.New(nil)
	defer reg.Close()
	id := reg.SurfaceID()
	if len(id) != 26 || !strings.HasPrefix(id, "srf_") || strings.Trim(id[4:], "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") != "" {
		t.Errorf("surface id %q", id)
	}
	if other := surface.New(nil).SurfaceID(); other == id {
		t.Errorf("two registries share surface id %q", id)
	}
	inv := surface.NewInvocationID()
	if len(inv) != 16 || !strings.HasPrefix(inv, "inv_") {
		t.Errorf("invocation id %q", inv)
	}
}

// AS-ID-001: property — ValidComponentType agrees with the grammar's
// regular expression (and the length cap) on strings over the characters
// that matter.
func TestComponentTypeGrammarProperty_AS_ID_001(t *testing.T) {
	grammar := regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$`)
	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.StringOfN(rapid.SampledFrom([]rune("az09-._A\u00e9")), 0, 12, -1).Draw(rt, "type")
		if rapid.Bool().Draw(rt, "long") {
			s += strings.Repeat("a", 120)
		}
		want := grammar.MatchString(s) && len(s) <= 128
		if got := surface.ValidComponentType(s); got != want {
			rt.Fatalf("ValidComponentType(%q) = %v, want %v", s, got, want)
		}
	})
}

// AS-ID-001: property — ValidCapabilityName and ValidInstanceID agree with
// their grammars' regular expressions on strings over the characters that
// matter, bytes outside ASCII included.
func TestNameAndInstanceGrammarProperty_AS_ID_001(t *testing.T) {
	name := regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)
	instance := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.StringOfN(rapid.SampledFrom([]rune("azAZ09-_.: \u00e9\x00\x7f")), 0, 12, -1).Draw(rt, "s")
		if rapid.Bool().Draw(rt, "long") {
			s += strings.Repeat("b", 120)
		}
		if got, want := surface.ValidCapabilityName(s), name.MatchString(s); got != want {
			rt.Fatalf("ValidCapabilityName(%q) = %v, want %v", s, got, want)
		}
		if got, want := surface.ValidInstanceID(s), instance.MatchString(s) && len(s) <= surface.MaxIDLength; got != want {
			rt.Fatalf("ValidInstanceID(%q) = %v, want %v", s, got, want)
		}
	})
}
