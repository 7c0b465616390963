package replica

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// HopHeader is the header a forwarded request carries: which replica
// forwarded it to which, when, and an HMAC over those and the request
// (method, host, request URI, session key) under a key derived from
// Options.Secret. A request that carries it is served where it lands and
// never forwarded again; one whose header does not verify is refused with
// 403, so nobody without the secret can make a replica skip forwarding.
const HopHeader = "Agentsurface-Replica-Hop"

// hop is a parsed HopHeader: "v1 <from> <to> <unix-ms> <signature>".
type hop struct {
	from, to string
	at       time.Time
	sig      []byte
}

var errBadHopHeader = errors.New("malformed " + HopHeader + " header")

// parseHop parses a HopHeader value. It accepts only what signHop
// produces: four space-separated fields after "v1", ids of at most 64
// bytes of [A-Za-z0-9_-], a decimal time and a 32-byte base64url
// signature.
func parseHop(v string) (hop, error) {
	f := strings.Split(v, " ")
	if len(f) != 5 || f[0] != "v1" || !validID(f[1]) || !validID(f[2]) || len(f[3]) > 16 {
		return hop{}, errBadHopHeader
	}
	ms, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || ms < 0 {
		return hop{}, errBadHopHeader
	}
	sig, err := base64.RawURLEncoding.DecodeString(f[4])
	if err != nil || len(sig) != sha256.Size {
		return hop{}, errBadHopHeader
	}
	return hop{from: f[1], to: f[2], at: time.UnixMilli(ms), sig: sig}, nil
}

func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// hopMAC is the signature of a hop of a request for the session k.
func (d *Directory) hopMAC(from, to string, ms int64, method, host, uri string, k key) []byte {
	m := hmac.New(sha256.New, d.hopKey)
	for _, s := range [...]string{"v1", from, to, strconv.FormatInt(ms, 10), method, host, uri} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	m.Write(k[:])
	return m.Sum(nil)
}

// signHop returns the HopHeader value of a request forwarded from this
// replica to another.
func (d *Directory) signHop(from, to string, at time.Time, method, host, uri string, k key) string {
	ms := at.UnixMilli()
	sig := d.hopMAC(from, to, ms, method, host, uri, k)
	return "v1 " + from + " " + to + " " + strconv.FormatInt(ms, 10) + " " + base64.RawURLEncoding.EncodeToString(sig)
}

// verifyHop checks a parsed hop against the request it came with and the
// time now: the signature, and an age within maxAge either way.
func (d *Directory) verifyHop(h hop, now time.Time, maxAge time.Duration, method, host, uri string, k key) bool {
	if age := now.Sub(h.at); age > maxAge || age < -maxAge {
		return false
	}
	return hmac.Equal(h.sig, d.hopMAC(h.from, h.to, h.at.UnixMilli(), method, host, uri, k))
}
