package canonical

import (
	"encoding/json"
	"testing"
)

// fingerprintRequest is a typical small request to fingerprint.
const fingerprintRequest = `{"capabilityId":"view:devices.table.selectRows","input":{"ids":["d1"]}}`

// BenchmarkDigest32KB measures canonical encoding plus FNV1a64 of the
// decoded 400-row value (about 32 kB canonical): with Marshal, with Append to
// a reused buffer, and with Digest, which streams the hash.
func BenchmarkDigest32KB(b *testing.B) {
	v := rowsValue(400)
	b.Run("Marshal+FNV1a64", func(b *testing.B) {
		b.ReportAllocs()
		var h uint64
		for b.Loop() {
			out, err := Marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			h = FNV1a64Bytes(out)
		}
		if Hex(h) != rowsDigest32KB {
			b.Fatal("wrong digest")
		}
	})
	b.Run("Append(reused)+FNV1a64", func(b *testing.B) {
		b.ReportAllocs()
		var h uint64
		buf := make([]byte, 0, 64<<10)
		for b.Loop() {
			out, err := Append(buf[:0], v)
			if err != nil {
				b.Fatal(err)
			}
			h = FNV1a64Bytes(out)
		}
		if Hex(h) != rowsDigest32KB {
			b.Fatal("wrong digest")
		}
	})
	b.Run("Digest", func(b *testing.B) {
		b.ReportAllocs()
		var d string
		for b.Loop() {
			var err error
			if d, err = Digest(v); err != nil {
				b.Fatal(err)
			}
		}
		if d != rowsDigest32KB {
			b.Fatal("wrong digest")
		}
	})
}

// BenchmarkAppendSmallMap measures Append of a small nested map to a
// reused buffer: one map per depth, so no key order is remembered.
func BenchmarkAppendSmallMap(b *testing.B) {
	v := map[string]any{"n": 1.0, "ids": []any{"a"}, "meta": map[string]any{"x": "y"}}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Append(buf[:0], v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonicalize32KB measures Canonicalize of the 400-row value's JSON
// text, whose rows have their members out of order.
func BenchmarkCanonicalize32KB(b *testing.B) {
	in := rowsJSON(400)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonicalizeRequest measures Canonicalize of a small request.
func BenchmarkCanonicalizeRequest(b *testing.B) {
	in := []byte(fingerprintRequest)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFNV1a64 measures hashing the 32 kB canonical encoding.
func BenchmarkFNV1a64(b *testing.B) {
	out, err := Marshal(rowsValue(400))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		FNV1a64Bytes(out)
	}
}

// BenchmarkCompareUTF16 measures the common case of ASCII keys.
func BenchmarkCompareUTF16(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		CompareUTF16("registrationId", "capabilityId")
		CompareUTF16("status", "tags")
	}
}

// BenchmarkJSONMarshal32KB is encoding/json on the same value, for scale.
func BenchmarkJSONMarshal32KB(b *testing.B) {
	v := rowsValue(400)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
