package surface

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// metaTitles are the titles of the meta tools.
var metaTitles = map[string]string{
	MetaDiscover: "Discover capabilities",
	MetaRead:     "Read an observation",
	MetaAct:      "Call an action or procedure",
}

// Title returns the name a client shows people for the tool (MCP's title
// and annotations.title), derived from the capability it calls: its
// component type, then its name, in words, as "Devices table: select
// rows" for view:devices.table.selectRows and "Devices: disable" for the
// procedure domain:devices.disable. A tool named apart from others of
// the same capability by an instance says which: "Devices table (side):
// select rows". A meta tool has a title of its own; a tool whose
// capability id does not read as one is titled by its name. It is
// computed here, once, for every adapter and a surface's contract, as
// [Tool.Hints] is.
func (t Tool) Title() string {
	if t.CapabilityID == "" {
		if title, ok := metaTitles[t.Name]; ok {
			return title
		}
		return t.Name
	}
	var path string
	if rest, ok := strings.CutPrefix(t.CapabilityID, "view:"); ok {
		path = rest
	} else if rest, ok := strings.CutPrefix(t.CapabilityID, "domain:"); ok {
		path = rest
	} else {
		return t.Name
	}
	subject, name := "", path
	if dot := strings.LastIndexByte(path, '.'); dot >= 0 {
		subject, name = words(path[:dot]), path[dot+1:]
	}
	name = words(name)
	if name == "" {
		return t.Name
	}
	if t.InstanceID != "" {
		subject = strings.TrimSpace(subject + " (" + t.InstanceID + ")")
	}
	if subject == "" {
		return capitalize(name)
	}
	return capitalize(subject) + ": " + name
}

// words spells an identifier as lowercase words: segments split at
// '.', '-', '_', '/' and spaces, camelCase split at its humps;
// abbreviations ("HTTP") keep their capitals.
func words(id string) string {
	var out []string
	for _, seg := range strings.FieldsFunc(id, func(r rune) bool { return r == '.' || r == '-' || r == '_' || r == '/' || r == ' ' }) {
		rs := []rune(seg)
		start := 0
		for i := 1; i <= len(rs); i++ {
			if i < len(rs) && !hump(rs, i) {
				continue
			}
			w := string(rs[start:i])
			if !abbreviation(w) {
				w = strings.ToLower(w)
			}
			out = append(out, w)
			start = i
		}
	}
	return strings.Join(out, " ")
}

// hump reports whether a camelCase word starts at rs[i]: an upper-case
// letter after a lower-case letter or digit, or the last capital of an
// abbreviation followed by a lower-case letter ("HTTPServer").
func hump(rs []rune, i int) bool {
	if !unicode.IsUpper(rs[i]) {
		return false
	}
	prev := rs[i-1]
	if unicode.IsLower(prev) || unicode.IsDigit(prev) {
		return true
	}
	return unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
}

// abbreviation reports whether w is two or more capitals (and digits).
func abbreviation(w string) bool {
	caps := 0
	for _, r := range w {
		switch {
		case unicode.IsUpper(r):
			caps++
		case !unicode.IsDigit(r):
			return false
		}
	}
	return caps >= 2
}

// capitalize returns s with its first letter in upper case.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
