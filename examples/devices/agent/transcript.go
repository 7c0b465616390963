package agent

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Transcript returns a report function that prints each step as one line
// of a table to w: number, title, tool, outcome (with a mark when it was
// not the expected one), duration and a short detail; a step's Link
// follows on a line of its own, whole. It is safe for concurrent use.
func Transcript(w io.Writer) func(Step) {
	var mu sync.Mutex
	header := false
	return func(s Step) {
		mu.Lock()
		defer mu.Unlock()
		if !header {
			header = true
			fmt.Fprintf(w, "%3s  %-44s %-36s %-24s %1s %9s  %s\n", "#", "step", "tool", "outcome", "", "ms", "detail")
		}
		mark, detail := "✓", oneLine(s.Detail)
		if !s.Expected() {
			mark, detail = "✗", "want "+s.Want+": "+detail
		}
		fmt.Fprintf(w, "%3d  %-44s %-36s %-24s %1s %9.2f  %s\n", s.N, clip(s.Title, 44), clip(s.Tool, 36),
			clip(s.Outcome, 24), mark, float64(s.Duration.Microseconds())/1000, clip(detail, 100))
		if s.Link != "" {
			fmt.Fprintf(w, "     ↳ %s\n", oneLine(s.Link)) // whole: the user opens it
		}
	}
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
