package replica

import (
	"strings"
	"testing"
	"time"
)

func testDirectory() *Directory {
	secret := []byte("0123456789abcdef0123456789abcdef")
	return &Directory{sessionKey: derive(secret, "s"), hopKey: derive(secret, "agentsurface replica hop v1")}
}

// A hop verifies within MaxHopAge either side of now, for exactly the
// request it was signed for.
func TestVerifyHopAgeAndBinding(t *testing.T) {
	d := testDirectory()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	k := d.key("token")
	h, err := parseHop(d.signHop("r_a", "r_b", at, "POST", "h:1", "/mcp?x=1", k))
	if err != nil {
		t.Fatal(err)
	}
	const maxAge = 30 * time.Second
	for _, c := range []struct {
		now  time.Time
		ok   bool
		name string
	}{
		{at, true, "at once"},
		{at.Add(maxAge), true, "at the age limit"},
		{at.Add(maxAge + time.Millisecond), false, "past it"},
		{at.Add(-maxAge), true, "a clock behind by the limit"},
		{at.Add(-maxAge - time.Millisecond), false, "further behind"},
	} {
		if got := d.verifyHop(h, c.now, maxAge, "POST", "h:1", "/mcp?x=1", k); got != c.ok {
			t.Errorf("%s: verified %v, want %v", c.name, got, c.ok)
		}
	}
	for name, req := range map[string][3]string{
		"method": {"GET", "h:1", "/mcp?x=1"}, "host": {"POST", "h:2", "/mcp?x=1"}, "uri": {"POST", "h:1", "/mcp?x=2"},
	} {
		if d.verifyHop(h, at, maxAge, req[0], req[1], req[2], k) {
			t.Errorf("verified for another %s", name)
		}
	}
	if d.verifyHop(h, at, maxAge, "POST", "h:1", "/mcp?x=1", d.key("other")) {
		t.Error("verified for another session")
	}
	other := testDirectory()
	other.hopKey = derive([]byte("another secret, also 32 bytes long"), "agentsurface replica hop v1")
	if other.verifyHop(h, at, maxAge, "POST", "h:1", "/mcp?x=1", k) {
		t.Error("verified under another secret")
	}
}

// parseHop takes what signHop writes and refuses anything else without
// panicking; what it accepts is exactly the five fields.
func FuzzParseHop(f *testing.F) {
	d := testDirectory()
	f.Add(d.signHop("r_a", "r_b", time.UnixMilli(1), "GET", "h", "/", d.key("t")))
	f.Add("v1 a b 1 AAAA")
	f.Add("v1  a b 1 " + strings.Repeat("A", 43))
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		h, err := parseHop(v)
		if err != nil {
			return
		}
		if !validID(h.from) || !validID(h.to) || len(h.sig) != 32 {
			t.Fatalf("accepted %q as %+v", v, h)
		}
		if !strings.HasPrefix(v, "v1 "+h.from+" "+h.to+" ") {
			t.Fatalf("accepted %q with fields out of place", v)
		}
	})
}
