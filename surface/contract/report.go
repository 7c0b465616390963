package contract

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Classes is a set of classes: which changes fail a check.
type Classes []Class

// ParseClasses reads a set of classes: a comma-separated list of
// "widening", "narrowing" and "neutral", or "any" (all three) or "none"
// (the empty set).
func ParseClasses(s string) (Classes, error) {
	switch strings.TrimSpace(s) {
	case "any":
		return Classes{Widening, Narrowing, Neutral}, nil
	case "none":
		return Classes{}, nil
	}
	var out Classes
	for part := range strings.SplitSeq(s, ",") {
		c := Class(strings.TrimSpace(part))
		switch c {
		case Widening, Narrowing, Neutral:
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		default:
			return nil, fmt.Errorf("contract: unknown class %q (want widening, narrowing, neutral, any or none)", part)
		}
	}
	return out, nil
}

// Failing returns the changes whose class is in cs.
func (cs Classes) Failing(changes []Change) []Change {
	var out []Change
	for _, c := range changes {
		if slices.Contains(cs, c.Class) {
			out = append(out, c)
		}
	}
	return out
}

// Summary counts changes by class: "3 changes: 1 widening, 1 narrowing,
// 1 neutral", or "no changes".
func Summary(changes []Change) string {
	if len(changes) == 0 {
		return "no changes"
	}
	n := map[Class]int{}
	for _, c := range changes {
		n[c.Class]++
	}
	noun := "changes"
	if len(changes) == 1 {
		noun = "change"
	}
	return fmt.Sprintf("%d %s: %d widening, %d narrowing, %d neutral", len(changes), noun, n[Widening], n[Narrowing], n[Neutral])
}

// WriteTable writes changes as a table for a person, one row per change
// (class, consumer, capability, field, what changed), then the summary.
func WriteTable(w io.Writer, changes []Change) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	if len(changes) > 0 {
		fmt.Fprintln(tw, "CLASS\tCONSUMER\tCAPABILITY\tFIELD\tCHANGE")
	}
	for _, c := range changes {
		class := string(c.Class)
		if c.Mixed {
			class += " (mixed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", class, c.Consumer, dash(c.Capability), c.Field, describe(c))
	}
	fmt.Fprintln(tw, Summary(changes))
	return tw.Flush()
}

// describe says what a change changed, on one line.
func describe(c Change) string {
	short := func(b []byte) string {
		if len(b) == 0 {
			return "-"
		}
		s := strings.Join(strings.Fields(string(b)), " ")
		if len([]rune(s)) > 40 {
			s = string([]rune(s)[:39]) + "…"
		}
		return s
	}
	values := short(c.Before) + " → " + short(c.After)
	switch {
	case strings.HasSuffix(c.Field, "Schema"): // the schemas are long; the note says where
		return c.Note
	case c.Note == "":
		return values
	}
	return values + " (" + c.Note + ")"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
