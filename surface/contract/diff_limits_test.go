package contract_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface/contract"
)

// A schema or the schemas of a contract beyond the size limits are
// refused with a typed error, before any work on them.
func TestCompareSizeLimits(t *testing.T) {
	big := `{"type":"object","description":"` + strings.Repeat("x", contract.MaxSchemaBytes) + `"}`
	_, err := contract.Compare(base(), withInput(big))
	var le *contract.LimitError
	if !errors.Is(err, contract.ErrTooLarge) || !errors.As(err, &le) || le.Limit != contract.MaxSchemaBytes || le.Size != len(big) ||
		!strings.Contains(err.Error(), "new contract") || !strings.Contains(le.What, "inputSchema of domain:shop.refund") {
		t.Fatalf("err = %v (%+v)", err, le)
	}
	if _, err := contract.Compare(withInput(big), base()); !errors.Is(err, contract.ErrTooLarge) || !strings.Contains(err.Error(), "old contract") {
		t.Fatalf("err = %v", err)
	}

	// Many schemas, each within the limit, beyond the limit together.
	many := base()
	one := `{"type":"object","description":"` + strings.Repeat("x", contract.MaxSchemaBytes-40) + `"}`
	for i := range contract.MaxSchemasBytes/contract.MaxSchemaBytes + 1 {
		c := addItemCap()
		c.CapabilityID = "view:shop.cart.c" + strconv.Itoa(i)
		c.InputSchema = json.RawMessage(one)
		many.Consumers[0].Capabilities = append(many.Consumers[0].Capabilities, c)
	}
	if _, err := contract.Compare(many, base()); !errors.As(err, &le) || le.What != "the schemas of the contract" || le.Limit != contract.MaxSchemasBytes {
		t.Fatalf("err = %v", err)
	}
}

// The schema proofs of one Compare share a budget: capabilities whose
// schemas are too complex to compare come out as unproven widenings, the
// later ones without trying once the budget is spent. (That a spent
// budget gives the same outcome whichever schema is old is checked in
// internal/schema.)
func TestCompareWorkBounded(t *testing.T) {
	old, new := base(), base()
	const n = 13
	for i := range n {
		c := addItemCap()
		c.CapabilityID = fmt.Sprintf("view:shop.cart.c%02d", i)
		c.InputSchema = defsUnion(200, "")
		old.Consumers[0].Capabilities = append(old.Consumers[0].Capabilities, c)
		c.InputSchema = defsUnion(200, `,"description":"changed"`)
		new.Consumers[0].Capabilities = append(new.Consumers[0].Capabilities, c)
	}
	{
		changes := compare(t, old, new)
		if len(changes) != n {
			t.Fatalf("%d changes, want %d", len(changes), n)
		}
		tooComplex, spent := 0, 0
		for i, c := range changes {
			if c.Field != "inputSchema" || c.Class != contract.Widening || !c.Mixed {
				t.Fatalf("change %d: %s %s mixed %v: %.200s", i, c.Field, c.Class, c.Mixed, c.Note)
			}
			switch {
			case strings.Contains(c.Note, "budget of this run of comparisons is spent"):
				spent++
			case strings.Contains(c.Note, "too complex"):
				if spent > 0 {
					t.Fatalf("change %d tried after the budget was spent", i)
				}
				tooComplex++
			default:
				t.Fatalf("change %d: %.200s", i, c.Note)
			}
		}
		if tooComplex == 0 || spent == 0 || tooComplex > contract.CompareWork/200_000+1 {
			t.Fatalf("%d too complex, %d after the budget was spent", tooComplex, spent)
		}
	}
}

// defsUnion is an input schema of n definitions under one anyOf: proving
// it included in itself is quadratic in n (once 8.8 s for 1,000, over a
// minute for 4,000).
func defsUnion(n int, extra string) json.RawMessage {
	var defs, refs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"k":{"const":%d}},"required":["k"]}`, i, i))
		refs = append(refs, fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i))
	}
	return json.RawMessage(`{"$defs":{` + strings.Join(defs, ",") + `},"type":"object","properties":{"v":{"anyOf":[` + strings.Join(refs, ",") + `]}}` + extra + `}`)
}

// 4,000 definitions under one anyOf come out as an unproven widening
// after a bounded proof.
func TestCompareManyDefs(t *testing.T) {
	old, new := base(), base()
	old.Consumers[0].Capabilities[0].InputSchema = defsUnion(4000, "")
	new.Consumers[0].Capabilities[0].InputSchema = defsUnion(4000, `,"description":"x"`)
	changes := compare(t, old, new)
	if len(changes) != 1 || changes[0].Class != contract.Widening || !changes[0].Mixed || !strings.Contains(changes[0].Note, "too complex") {
		t.Fatalf("%d changes; the first: %.300s", len(changes), table(changes))
	}
}

// BenchmarkCompareDefs compares contracts whose one input schema is a
// union of n definitions, changed by a description: what agentsurface
// diff does with such files once they are read. The proof stops at its
// budget, so the cost grows with the text only.
func BenchmarkCompareDefs(b *testing.B) {
	for _, n := range []int{1000, 2000, 4000} {
		old, new := base(), base()
		old.Consumers[0].Capabilities[0].InputSchema = defsUnion(n, "")
		new.Consumers[0].Capabilities[0].InputSchema = defsUnion(n, `,"description":"x"`)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := contract.Compare(old, new); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
