package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fence is a fenced code block of a Markdown text: its language and body.
var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```$")

// Every Go, templ and JavaScript excerpt of the guide docs/your-app.md
// appears, line for line (indentation aside), in the board's sources, so
// that the guide shows code that builds and runs.
func TestGuideExcerpts(t *testing.T) {
	guide, err := os.ReadFile("../../docs/your-app.md")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]string{"go": {"main.go", "store.go"}, "templ": {"board.templ"}, "js": {"static/board.js"}}
	n := 0
	for _, m := range fence.FindAllStringSubmatch(string(guide), -1) {
		files, checked := sources[m[1]]
		if !checked {
			continue
		}
		n++
		found := false
		for _, f := range files {
			b, err := os.ReadFile(filepath.FromSlash(f))
			if err != nil {
				t.Fatal(err)
			}
			found = found || strings.Contains(trimmed(string(b)), trimmed(m[2]))
		}
		if !found {
			t.Errorf("this %s excerpt of the guide is not in %v:\n%s", m[1], files, m[2])
		}
	}
	if n < 10 {
		t.Fatalf("only %d excerpts checked", n)
	}
}

// trimmed is text with each line trimmed of surrounding white space,
// between newlines.
func trimmed(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return "\n" + strings.Join(lines, "\n") + "\n"
}
