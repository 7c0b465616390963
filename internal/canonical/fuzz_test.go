package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzCanonicalize feeds arbitrary bytes to Canonicalize. It must never
// panic; when it succeeds, its output must be valid JSON, a fixed point, and
// equal to Marshal of the value encoding/json decodes from the same input.
//
// The two parsers agree on invalid UTF-8 inside strings and on lone
// surrogate escapes (both become U+FFFD), on duplicate keys (the last wins)
// and on numbers too large for a double (both reject them). They differ only
// in the nesting limit: MaxDepth here, 10000 in encoding/json.
func FuzzCanonicalize(f *testing.F) {
	for _, seed := range []string{
		`""`, `"a"`, `"é"`,
		`{"b":1,"a":{"y":[1,2],"x":"s"}}`,
		`{"a":1}`,
		`[1,null,3]`, `-0`, `{"n":-0}`,
		`{"😀":1,"\uFFFD":2}`, `{"\ufffd":2,"😀":1}`,
		`[1e21,0.1,1.5e-7,100]`,
		`{"capabilityId":"view:devices.table.selectRows","input":{"ids":["d1"],"mode":"replace"},"instanceId":null,"registrationId":null,"surfaceVersion":null,"confirmationId":null}`,
		`{"capabilityId":"view:devices.table.selectRows","input":{"ids":["d1"]}}`,
		`{"a":1,"b":2,"a":3}`,
		`"\ud800"`, `"\ud83d\ude00"`, `"\udc00\ud800x"`, "\"\xff\xfe\"", "{\"\xff\":1,\"\\ufffd\":2}",
		`"\u0000\u001f<>&\u2028\u007f\/"`,
		` [ 1.0 , 1E+2 , 9007199254740993 , 5e-324 , 1e-400 ] `,
		`1e400`, `[`, `{"a":}`, `tru`, `01`,
		`[[[[[[[[[[]]]]]]]]]]`,
	} {
		f.Add([]byte(seed))
	}
	f.Add(rowsJSON(3))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		var v any
		jerr := json.Unmarshal(in, &v)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Canonicalize error %v is not *Error", err)
			}
			if out != nil {
				t.Fatalf("Canonicalize returned output with an error")
			}
			if jerr == nil && ce.Reason != reasonTooDeep {
				t.Fatalf("Canonicalize(%q) failed (%v) but encoding/json accepts it", in, err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q, invalid JSON", in, out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonicalize(%q) = %q, not a fixed point: %q, %v", in, out, again, err)
		}
		if jerr != nil {
			t.Fatalf("Canonicalize(%q) succeeded but encoding/json rejects it: %v", in, jerr)
		}
		m, err := Marshal(v)
		if err != nil || !bytes.Equal(m, out) {
			t.Fatalf("Canonicalize(%q) = %q, but Marshal(json.Unmarshal) = %q, %v", in, out, m, err)
		}
		d, err := Digest(v)
		if want := Hex(FNV1a64Bytes(out)); err != nil || d != want {
			t.Fatalf("Digest = %s, %v; want %s", d, err, want)
		}
	})
}
