package surface_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

type matrixRow struct {
	code   surface.Code
	retry  string
	cached string
}

// readMatrix extracts the rows of the semantics.md §4.1 error table.
func readMatrix(t *testing.T, text string) []matrixRow {
	t.Helper()
	row := regexp.MustCompile("^\\| `([A-Z_]+)` \\| [^|]* \\| ([^|]*) \\| (yes|never) \\|")
	var rows []matrixRow
	for _, line := range strings.Split(text, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows = append(rows, matrixRow{surface.Code(m[1]), strings.TrimSpace(m[2]), m[3]})
		}
	}
	if len(rows) == 0 {
		t.Fatal("no error matrix rows found")
	}
	return rows
}

// AS-ERR-001: the codes, retry rules and cacheability in code match the
// error matrix of semantics.md §4.1 (kept in testdata; checked against the
// specification itself when it sits beside the checkout).
func TestErrorMatrix_AS_ERR_001(t *testing.T) {
	local, err := os.ReadFile(filepath.Join("testdata", "error-matrix.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := readMatrix(t, string(local))
	if spec, err := os.ReadFile(filepath.Join("..", "..", "shared", "spec", "semantics.md")); err == nil {
		if specRows := readMatrix(t, string(spec)); !slices.Equal(specRows, rows) {
			t.Fatalf("testdata/error-matrix.md is out of date with semantics.md §4.1:\n%v\n%v", specRows, rows)
		}
	} else {
		t.Log("specification not found beside the checkout; checking the testdata copy only")
	}
	var specCodes []surface.Code
	for _, r := range rows {
		specCodes = append(specCodes, r.code)
		retry, cached, known := surface.ErrorRule(r.code)
		if !known {
			t.Errorf("%s: missing from the error matrix", r.code)
			continue
		}
		if cached != (r.cached == "yes") {
			t.Errorf("%s: cached %v, spec %q", r.code, cached, r.cached)
		}
		// The base retry is one of the spec's alternatives; the variants are
		// applied where the errors are made (tested with the behaviours).
		words := regexp.MustCompile(`[a-z-]+`).FindAllString(r.retry, -1)
		if !slices.Contains(words, string(retry)) {
			t.Errorf("%s: retry %q not in %q", r.code, retry, r.retry)
		}
		e := surface.NewError(r.code, "", nil)
		if e.Message == "" || e.Retry != retry || !errors.Is(e, &surface.Error{Code: r.code}) || errors.Is(e, surface.CodeCancelled) != (r.code == surface.CodeCancelled) {
			t.Errorf("%s: NewError %+v", r.code, e)
		}
	}
	codes := surface.ErrorCodes()
	slices.Sort(codes)
	slices.Sort(specCodes)
	if !slices.Equal(codes, specCodes) {
		t.Errorf("code sets differ:\n%v\n%v", codes, specCodes)
	}
}

func TestErrorMessagesAreCapped(t *testing.T) {
	long := strings.Repeat("é", 400)
	e := surface.Precondition(long, map[string]any{"n": 1})
	if n := len([]rune(e.Message)); n != 300 || !strings.HasSuffix(e.Message, "…") || e.Code != surface.CodePreconditionFailed {
		t.Fatalf("%d %q", n, e.Message[len(e.Message)-8:])
	}
}

// AS-ERR-001: a Code is the one name of an error code: errors.Is matches
// an *Error by it, and user code may return it bare to fail with it.
func TestCodeIsTheErrorsIsTarget_AS_ERR_001(t *testing.T) {
	e := surface.NewError(surface.CodeStaleCapability, "", nil)
	if !errors.Is(e, surface.CodeStaleCapability) || errors.Is(e, surface.CodeTimeout) {
		t.Fatal("errors.Is does not match by code")
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", e), surface.CodeStaleCapability) {
		t.Fatal("errors.Is does not see through wrapping")
	}
	if surface.CodeTimeout.Error() != "TIMEOUT" {
		t.Fatal(surface.CodeTimeout.Error())
	}
}
