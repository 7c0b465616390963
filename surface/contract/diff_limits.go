package contract

import (
	"errors"
	"fmt"

	"github.com/agentsurface/agentsurface/internal/schema"
)

// Limits of Compare. A contract may come from anywhere (a hand-edited
// file, an MCP server of another implementation), so what Compare reads
// and the work it does are bounded: a contract beyond the size limits is
// refused with a [*LimitError], and schema comparisons beyond the work
// limit are reported as unproven widenings.
const (
	// MaxSchemaBytes is the longest schema text, one capability's input
	// or output schema, that Compare reads.
	MaxSchemaBytes = schema.HardMaxBytes
	// MaxSchemasBytes bounds the schema texts of one contract together.
	MaxSchemasBytes = 32 << 20
	// MaxFileBytes is the largest contract file a reader should accept
	// (agentsurface diff refuses a larger one).
	MaxFileBytes = 64 << 20
	// CompareWork is the work the schema proofs of one Compare may do
	// together, in the prover's steps (see schema.ProofWork): once it is
	// spent, every further schema change is reported as an unproven
	// widening (mixed), too complex to compare, without trying.
	CompareWork = 20 * schema.ProofWork
)

// ErrTooLarge reports a contract beyond a size limit of Compare.
var ErrTooLarge = errors.New("contract: too large to compare")

// LimitError reports what in a contract exceeds a size limit; it matches
// [ErrTooLarge] with errors.Is.
type LimitError struct {
	// What names what is too large ("the inputSchema of … for …", "the
	// schemas of the contract").
	What string
	// Size and Limit are in bytes.
	Size, Limit int
}

// Error says what is too large.
func (e *LimitError) Error() string {
	return fmt.Sprintf("contract: %s is %d bytes, more than the limit of %d", e.What, e.Size, e.Limit)
}

// Is reports whether target is ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// checkSizes checks a contract's schemas against MaxSchemaBytes and
// MaxSchemasBytes.
func checkSizes(c *Contract) error {
	total := 0
	for _, v := range c.Consumers {
		for i := range v.Capabilities {
			cp := &v.Capabilities[i]
			for _, s := range []struct {
				field string
				n     int
			}{{"inputSchema", len(cp.InputSchema)}, {"outputSchema", len(cp.OutputSchema)}} {
				if s.n > MaxSchemaBytes {
					return &LimitError{What: fmt.Sprintf("the %s of %s for %s", s.field, cp.Key(), v.Name), Size: s.n, Limit: MaxSchemaBytes}
				}
				total += s.n
			}
		}
	}
	if total > MaxSchemasBytes {
		return &LimitError{What: "the schemas of the contract", Size: total, Limit: MaxSchemasBytes}
	}
	return nil
}
