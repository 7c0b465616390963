package contract_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface/contract"
)

// A contract file parses back to the same contract, and encodes to the
// same bytes.
func TestParseRoundTrip(t *testing.T) {
	b := encode(t, must(contract.FromRegistry(shop(t, shopOptions{}), agent, console)))
	c, err := contract.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if again := encode(t, c); !bytes.Equal(again, b) {
		t.Fatalf("round trip differs:\n%s", again)
	}
	if !bytes.HasSuffix(b, []byte("}\n")) || !bytes.HasPrefix(b, []byte("{\n  \"format\": \"agentsurface.contract\",\n  \"version\": 1,")) {
		t.Fatalf("not the file form: %.80s", b)
	}
}

// Parse accepts entries in any order and key order and writes them in
// the canonical one.
func TestParseNormalizes(t *testing.T) {
	in := `{"version":1,"format":"agentsurface.contract","source":"mcp","consumers":[
		{"consumer":"b","capabilities":[{"wireName":"z","visibility":"listed","inputSchema":{"type":"object","properties":{}}},
			{"wireName":"a","visibility":"listed"}]},
		{"consumer":"a","capabilities":[]}]}`
	c, err := contract.Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c.Consumers[0].Name != "a" || c.Consumers[1].Capabilities[0].WireName != "a" ||
		string(c.Consumers[1].Capabilities[1].InputSchema) != `{"properties":{},"type":"object"}` {
		t.Fatalf("%+v", c)
	}
}

func TestParseRejects(t *testing.T) {
	const head = `"format":"agentsurface.contract","version":1,"source":"registry"`
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", `{`, "unexpected EOF"},
		{"unknown field", `{` + head + `,"consumers":[],"extra":1}`, "unknown field"},
		{"other format", `{"format":"x","version":1,"source":"registry","consumers":[]}`, "format"},
		{"other version", `{"format":"agentsurface.contract","version":2,"source":"registry","consumers":[]}`, "version 2"},
		{"unknown source", `{"format":"agentsurface.contract","version":1,"source":"disk","consumers":[]}`, "source"},
		{"trailing data", `{` + head + `,"consumers":[]} {}`, "after the contract"},
		{"consumer twice", `{` + head + `,"consumers":[{"consumer":"a","capabilities":[]},{"consumer":"a","capabilities":[]}]}`, "twice"},
		{"nameless consumer", `{` + head + `,"consumers":[{"capabilities":[]}]}`, "without a name"},
		{"capability twice", `{` + head + `,"consumers":[{"consumer":"a","capabilities":[{"capabilityId":"view:a.b","visibility":"hidden"},{"capabilityId":"view:a.b","visibility":"hidden"}]}]}`, "twice"},
		{"unknown visibility", `{` + head + `,"consumers":[{"consumer":"a","capabilities":[{"capabilityId":"view:a.b","visibility":"maybe"}]}]}`, "visibility"},
		{"anonymous capability", `{` + head + `,"consumers":[{"consumer":"a","capabilities":[{"visibility":"listed"}]}]}`, "neither"},
		{"component twice", `{` + head + `,"consumers":[{"consumer":"a","components":[{"type":"t","instanceId":"i","description":""},{"type":"t","instanceId":"i","description":""}],"capabilities":[]}]}`, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := contract.Parse([]byte(tc.in))
			if !errors.Is(err, contract.ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrFormat mentioning %q", err, tc.want)
			}
		})
	}
}

// FuzzParse reads contract files, which a CI gate takes from pull
// requests: Parse never panics, and what it accepts encodes to a file it
// reads back to the same bytes, with no change against itself and a
// classified change for every consumer against an empty contract.
func FuzzParse(f *testing.F) {
	f.Add(encode(f, must(contract.FromRegistry(shop(f, shopOptions{}), agent, console))))
	f.Add([]byte(`{"format":"agentsurface.contract","version":1,"source":"mcp","consumers":[{"consumer":"a","capabilities":[{"wireName":"t","visibility":"listed","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"idempotentHint":false}}]}]}`))
	f.Add([]byte(`{"format":"agentsurface.contract","version":1,"source":"registry","consumers":[]}`))
	f.Add([]byte(`{"format":"agentsurface.contract","version":1,"source":"registry","consumers":[{"consumer":"a","capabilities":[{"capabilityId":"view:a.b","visibility":"exposed","Effect":"read","effect":"navigation","reversible":null,"confirmation":"","idempotent":true}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := contract.Parse(data)
		if err != nil {
			if !errors.Is(err, contract.ErrFormat) {
				t.Fatalf("an error that is not ErrFormat: %v", err)
			}
			return
		}
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		again, err := contract.Parse(b)
		if err != nil {
			t.Fatalf("the encoding does not parse: %v\n%s", err, b)
		}
		if b2, _ := again.Encode(); !bytes.Equal(b, b2) {
			t.Fatalf("not stable:\n%s\n%s", b, b2)
		}
		if ch, err := contract.Compare(c, again); err != nil || len(ch) != 0 {
			t.Fatalf("changes against itself: %v %+v", err, ch)
		}
		empty := &contract.Contract{Format: contract.Format, Version: contract.Version, Source: c.Source}
		ch, err := contract.Compare(empty, c)
		if err != nil || len(ch) != len(c.Consumers) {
			t.Fatalf("against nothing: %v, %d changes for %d consumers", err, len(ch), len(c.Consumers))
		}
	})
}
