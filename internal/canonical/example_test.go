package canonical_test

import (
	"fmt"
	"math"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// The fingerprint of a request, as the TypeScript reference computes it.
func ExampleDigest() {
	fp, err := canonical.Digest(map[string]any{
		"capabilityId":   "view:devices.table.selectRows",
		"input":          map[string]any{"ids": []any{"d1"}, "mode": "replace"},
		"instanceId":     nil,
		"registrationId": nil,
		"surfaceVersion": nil,
		"confirmationId": nil,
	})
	fmt.Println(fp, err)
	// Output: d07828fbd19f720e <nil>
}

func ExampleMarshal() {
	b, err := canonical.Marshal(map[string]any{
		"b":      1.0,
		"a":      []any{1e21, 0.1, 1.5e-7, math.Copysign(0, -1)},
		"html":   "<&>",
		"😀":      true,
		"\uFFFD": nil,
	})
	fmt.Println(string(b), err)
	// Output: {"a":[1e+21,0.1,1.5e-7,0],"b":1,"html":"<&>","😀":true,"�":null} <nil>
}

func ExampleCanonicalize() {
	b, err := canonical.Canonicalize([]byte(`{ "z": [1.0, 2E3], "a": "\u003c\ud83d\ude00", "a": "last" }`))
	fmt.Println(string(b), err)
	// Output: {"a":"last","z":[1,2000]} <nil>
}

func ExampleCompareUTF16() {
	// U+1F600 is the surrogate pair D83D DE00, which sorts before U+FFFD
	// in JavaScript, although its UTF-8 encoding sorts after.
	fmt.Println(canonical.CompareUTF16("😀", "\uFFFD"))
	// Output: -1
}

func ExampleFNV1a64() {
	fmt.Println(canonical.Hex(canonical.FNV1a64("é")))
	// Output: af64644c8602d3a4
}
