package surface

import "io"

// Test hooks into unexported state (the export_test.go idiom).

// TombstoneLive reports whether a live tombstone remembers regID.
func (r *Registry) TombstoneLive(regID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tombs.byRegistration(regID, r.now())
	return ok
}

// TombstoneListing reports whether a live tombstone lists capID.
func (r *Registry) TombstoneListing(capID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tombs.listing(nil, capID, r.now())) > 0
}

// TombstoneCount returns how many tombstones are stored, expired included.
func (r *Registry) TombstoneCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tombs.len()
}

// ErrorRule exposes a row of the error matrix to tests.
func ErrorRule(c Code) (retry Retry, cached, known bool) {
	rule, ok := errorMatrix[c]
	return rule.retry, rule.cached, ok
}

// ErrorCodes lists the codes of the error matrix.
func ErrorCodes() []Code {
	codes := make([]Code, 0, len(errorMatrix))
	for c := range errorMatrix {
		codes = append(codes, c)
	}
	return codes
}

// The wire-name codec, unexported because hosts resolve names through a
// toolset's catalog, is tested from the outside through these.
type WireKey = wireKey

var (
	AssignWireNames = assignWireNames
	EncodeWireName  = func(k WireKey) string { return encodeWireName(k, 0) }
	DecodeWireName  = decodeWireName
)

const MaxWireNameLength = maxWireNameLength

// Unexported helpers the external tests exercise.
var (
	ParseCapabilityID   = parseCapabilityID
	ViewID              = viewID
	ValidCapabilityName = validCapabilityName
	ValidComponentType  = validComponentType
	ValidInstanceID     = validInstanceID
	NewInvocationID     = newInvocationID
	DefaultLimits       = Limits{}.withDefaults()
)

// ParsedID is the parsed form of a capability id.
type ParsedID = parsedID

// NewConsoleSink returns the development audit console writing to w.
func NewConsoleSink(w io.Writer) AuditSink { return &consoleSink{w: w} }
