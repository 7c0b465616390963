package surface_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// fuzzConfig is a typed action input with fields whose Go types are
// narrower than JSON numbers and values that may be null.
type fuzzConfig struct {
	N     int            `json:"n"`
	U     uint8          `json:"u,omitempty"`
	F     float64        `json:"f,omitempty"`
	Name  *string        `json:"name,omitempty"`
	Tags  map[string]int `json:"tags,omitempty"`
	Items []fuzzItem     `json:"items,omitempty"`
}

type fuzzItem struct {
	ID string `json:"id"`
}

// FuzzInvoke calls Invoke with arbitrary capability, instance,
// registration and invocation ids and arbitrary input bytes, against one
// registry holding two devices tables (typed selectRows input, readState
// observation), an echo action taking and returning any, and a configure
// action whose typed input it echoes back.
//
// Invoke must never panic and must return a Result that is well formed:
// status ok (no Error; any Output valid JSON) or error (an Error with a Code
// from the closed set, a non-empty Message of at most 300 UTF-16 units, a
// Retry from the closed set); CapabilityID echoes the request verbatim;
// InvocationID echoes it, or is a minted inv_ id when none was sent; the
// Result marshals with json.Marshal to valid JSON. In addition, configure
// never fails output-invalid: an input that validates decodes into its Go
// type, and that value marshals to output its inferred output schema
// accepts.
//
// The registration ids "@table" and "@echo" stand for the live ids of the
// main table and of the echo component, so the fuzzer can reach the
// execution phases with a matching registration id.
func FuzzInvoke(f *testing.F) {
	reg := surfacetest.NewRegistry(f, nil)
	main := surfacetest.MustRegister(f, reg, table("main", nil))
	surfacetest.MustRegister(f, reg, table("side", nil))
	echo := surfacetest.MustRegister(f, reg, surface.Component{
		Type: "devices.free", InstanceID: "main", Description: "Free-form actions",
		Actions: map[string]surface.Capability{
			"echo": surface.Action(surface.ActionDef[any, any]{
				Description: "Returns its input",
				Effect:      surface.EffectLocalState,
				Execute:     func(_ context.Context, _ *surface.Call, in any) (any, error) { return in, nil },
			}),
			"configure": surface.Action(surface.ActionDef[fuzzConfig, fuzzConfig]{
				Description: "Returns its typed input",
				Effect:      surface.EffectLocalState,
				Execute:     func(_ context.Context, _ *surface.Call, in fuzzConfig) (fuzzConfig, error) { return in, nil },
			}),
		},
	})
	regIDs := map[string]string{"@table": main.ID(), "@echo": echo.ID()}

	const (
		sel  = "view:devices.table.selectRows"
		read = "view:devices.table.readState"
		ech  = "view:devices.free.echo"
		conf = "view:devices.free.configure"
	)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, s := range []struct {
		capID, instance, regID, invID, input string
	}{
		// Valid calls.
		{sel, "main", "@table", "", `{"ids":["a"]}`},
		{sel, "", "@table", "inv-1", `{"ids":["a","b"]}`},
		{sel, "", "", "inv-2", `{"ids":["a"]}`}, // ambiguous: two tables
		{read, "side", "", "", ``},
		{read, "main", "@table", "inv-3", `{"ignored":true}`},
		{ech, "", "@echo", "", `{"x":[1,2,{"y":null}],"s":"😀"}`},
		{ech, "main", "", "", `"just a string"`},
		{ech, "", "", "", ``},
		{conf, "", "@echo", "", `{"n":1,"u":255,"f":0.5,"name":"x","tags":{"a":1},"items":[{"id":"i"}]}`},
		{conf, "", "", "", `{"n":-0,"tags":null,"items":null}`},
		// The same invocation id again: replay, then a conflict.
		{sel, "main", "@table", "inv-1", `{"ids":["a","b"]}`},
		{sel, "main", "@table", "inv-1", `{"ids":["c"]}`},
		// Invalid JSON and shapes.
		{sel, "main", "", "", `{"ids":[`},
		{sel, "main", "", "", `{"ids":["a"]}}`},
		{sel, "main", "", "", `{'ids':['a']}`},
		{sel, "main", "", "", `{"ids":"a"}`},
		{sel, "main", "", "", `{"ids":["a"],"extra":1}`},
		{sel, "main", "", "", "\xef\xbb\xbf{\"ids\":[]}"},
		{sel, "main", "", "", `null`},
		// Huge numbers and NaN-like text.
		{conf, "", "", "", `{"n":1e309}`},
		{conf, "", "", "", `{"n":123456789012345678901234567890}`},
		{conf, "", "", "", `{"n":9007199254740993}`},
		{conf, "", "", "", `{"n":1.5}`},
		{conf, "", "", "", `{"n":1,"u":256}`},
		{conf, "", "", "", `{"n":1,"f":1e-400}`},
		{conf, "", "", "", `{"n":1,"f":NaN}`},
		{conf, "", "", "", `{"n":1,"f":"NaN"}`},
		{ech, "", "", "", `Infinity`},
		{ech, "", "", "", `-Infinity`},
		{ech, "", "", "", `1e`},
		{ech, "", "", "", `-0`},
		{ech, "", "", "", `[1e21,0.1,1.5e-7,100,5e-324,1.7976931348623157e308]`},
		// Deep nesting.
		{ech, "", "", "", deep(64)},
		{ech, "", "", "", deep(999)},
		{ech, "", "", "", deep(1001)},
		{ech, "", "", "", deep(20000)},
		{sel, "main", "", "", `{"ids":` + deep(500) + `}`},
		// Unicode.
		{ech, "", "", "", `{"s":"\ud800","t":"\udc00\ud800x","u":"\u0000\u2028"}`},
		{ech, "", "", "", "{\"\xff\":\"\xfe\"}"},
		{sel, "main", "", "", `{"ids":["😀","é","\uFFFD"]}`},
		{ech, "", "", "", `{"😀":1,"\uFFFD":2,"a":3,"a":4}`},
		// Bad or odd ids.
		{"view:devices.table.selectRows ", "main", "", "", `{"ids":[]}`},
		{"VIEW:devices.table.selectRows", "main", "", "", `{"ids":[]}`},
		{"view:devices.table.", "", "", "", ``},
		{"view:.selectRows", "", "", "", ``},
		{"view:devicés.table.x", "", "", "", ``},
		{"view:" + strings.Repeat("a", 200) + ".x", "", "", "", ``},
		{"domain:devices.disable", "", "", "", `{}`},
		{"domain:", "", "", "", ``},
		{"", "", "", "", ``},
		{"\xff\xfe", "\xff", "\xff", "\xff", "\xff"},
		{sel, "../main", "", "", `{"ids":[]}`},
		{sel, "mäin", "", "", `{"ids":[]}`},
		{sel, "main", "reg_0001abcdef", "", `{"ids":[]}`},
		{sel, "main", "@echo", "", `{"ids":[]}`},
		{sel, "main", "@table", "an id with spaces and 😀", `{"ids":[]}`},
		{sel, "main", "@table", strings.Repeat("x", 10000), `{"ids":[]}`},
	} {
		f.Add(s.capID, s.instance, s.regID, s.invID, []byte(s.input))
	}

	f.Fuzz(func(t *testing.T, capID, instance, regID, invID string, input []byte) {
		if id, ok := regIDs[regID]; ok {
			regID = id
		}
		inv := surface.Invocation{InvocationID: invID, CapabilityID: capID, InstanceID: instance, RegistrationID: regID}
		if len(input) > 0 {
			inv.Input = json.RawMessage(input)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res := reg.Invoke(ctx, inv, surface.InvokeOptions{Consumer: surfacetest.Consumer()})
		if ctx.Err() != nil {
			t.Fatalf("Invoke took more than 10s")
		}

		b, err := json.Marshal(res)
		if err != nil {
			t.Fatalf("json.Marshal(result): %v", err)
		}
		if !json.Valid(b) {
			t.Fatalf("the result's JSON is invalid: %q", b)
		}
		// The capability id is echoed verbatim, even when ids that differ
		// only in invalid UTF-8 bytes reuse one invocation id (they are
		// different requests: a conflict, never a replay of the other).
		if res.CapabilityID != capID {
			t.Errorf("capabilityId = %q, want the request's %q", res.CapabilityID, capID)
		}
		switch {
		case invID != "" && res.InvocationID != invID:
			t.Errorf("invocationId = %q, want %q", res.InvocationID, invID)
		case invID == "" && (!strings.HasPrefix(res.InvocationID, "inv_") || len(res.InvocationID) != 16):
			t.Errorf("minted invocationId %q", res.InvocationID)
		}
		switch res.Status {
		case surface.StatusOK:
			if res.Error != nil {
				t.Fatalf("ok result with an error: %s", b)
			}
			if res.Output != "" && !json.Valid([]byte(res.Output)) {
				t.Fatalf("output is not JSON: %q", res.Output)
			}
		case surface.StatusError:
			e := res.Error
			if e == nil {
				t.Fatalf("error result without an error: %s", b)
			}
			if !allCodes[e.Code] {
				t.Errorf("code %q is not in the closed set: %s", e.Code, b)
			}
			if !allRetries[e.Retry] {
				t.Errorf("retry %q is not in the closed set: %s", e.Retry, b)
			}
			if n := len(utf16.Encode([]rune(e.Message))); n == 0 || n > 300 || !utf8.ValidString(e.Message) {
				t.Errorf("message of %d UTF-16 units: %q", n, e.Message)
			}
			if capID == conf && e.Code == surface.CodeExecutionFailed && e.Details["reason"] == "output-invalid" {
				t.Errorf("configure echoed a validated input but its output is invalid; input %q", input)
			}
		default:
			t.Fatalf("status %q: %s", res.Status, b)
		}
	})
}
