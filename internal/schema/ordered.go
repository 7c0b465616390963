package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/agentsurface/agentsurface/internal/canonical"
)

// Schemas are shown as authored (semantics §10.8): a model fills arguments
// in the order it is shown them. The compiled nodes do not depend on key
// order; the helpers here keep the text's. A raw schema's text is the
// author's, byte for byte apart from insignificant whitespace; an
// inferred one lists each struct's properties in field order.

// errText is the reason of a schema text that cannot be shown as written.
var errText = errors.New("invalid JSON")

// checkText reports what keeps a schema text from being shown as written:
// invalid UTF-8, or an object with a repeated key (decoding keeps the
// last value, while the text would show both).
func checkText(raw []byte) error {
	if !utf8.Valid(raw) {
		return &Error{Reason: "schema text is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func(path string) error
	walk = func(path string) error {
		t, err := dec.Token()
		if err != nil {
			return &Error{Path: path, Reason: "not valid JSON: " + err.Error()}
		}
		switch t {
		case json.Delim('{'):
			// A list for the usual few keys, a set once there are many
			// (such as a large $defs), so that the check stays linear.
			var seen []string
			var many map[string]bool
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return &Error{Path: path, Reason: "not valid JSON: " + err.Error()}
				}
				key, _ := kt.(string)
				if many != nil && many[key] || many == nil && slices.Contains(seen, key) {
					return &Error{Path: path + "/" + escapePointer(key), Reason: "the key " + strconv.Quote(key) + " appears twice in one object"}
				}
				switch {
				case many != nil:
					many[key] = true
				case len(seen) < 16:
					seen = append(seen, key)
				default:
					many = make(map[string]bool, 2*len(seen))
					for _, k := range seen {
						many[k] = true
					}
					many[key] = true
				}
				if err := walk(path + "/" + escapePointer(key)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(path + "/" + strconv.Itoa(i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	return walk("")
}

// compactText returns raw without insignificant whitespace: the text a
// raw schema is shown with.
func compactText(raw []byte) (string, error) {
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		return "", &Error{Reason: "not valid JSON: " + err.Error()}
	}
	return b.String(), nil
}

// inferredText returns the agent-visible text of an inferred schema from
// the JSON github.com/google/jsonschema-go wrote for it, keeping its key
// order (properties in struct field order): strings as canonical JSON
// writes them, the unconstrained schema true as {}, and no
// "additionalProperties" where it is true (the default) or a schema (a Go
// map's value schema, which the validator checks but the subset does not
// show).
func inferredText(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	out, err := appendInferred(nil, dec)
	if err != nil {
		return "", &Error{Reason: "cannot re-encode the inferred schema: " + err.Error()}
	}
	return string(out), nil
}

// appendInferred appends the schema dec reads next.
func appendInferred(out []byte, dec *json.Decoder) ([]byte, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t == true {
		return append(out, "{}"...), nil
	}
	if t != json.Delim('{') {
		return appendToken(out, dec, t)
	}
	out = append(out, '{')
	n := 0
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		if key == "additionalProperties" {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			if string(v) != "false" { // true, or a map's value schema: not shown
				continue
			}
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(canonical.AppendString(out, key), ':')
		switch key {
		case "additionalProperties":
			out = append(out, "false"...)
		case "items":
			if out, err = appendInferred(out, dec); err != nil {
				return nil, err
			}
		case "properties":
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return nil, cmpErr(err)
			}
			out = append(out, '{')
			for i := 0; dec.More(); i++ {
				pt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				name, _ := pt.(string)
				if i > 0 {
					out = append(out, ',')
				}
				out = append(canonical.AppendString(out, name), ':')
				if out, err = appendInferred(out, dec); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			out = append(out, '}')
		default:
			t, err := dec.Token()
			if err != nil {
				return nil, err
			}
			if out, err = appendToken(out, dec, t); err != nil {
				return nil, err
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// cmpErr is err, or errText when the input had another shape than
// expected.
func cmpErr(err error) error {
	if err != nil {
		return err
	}
	return errText
}

// appendToken appends the JSON value that starts with token t, reading
// the rest of it from dec.
func appendToken(out []byte, dec *json.Decoder, t json.Token) ([]byte, error) {
	switch v := t.(type) {
	case json.Delim:
		end := byte('}')
		if v == '[' {
			end = ']'
		}
		out = append(out, byte(v))
		for i := 0; dec.More(); i++ {
			if i > 0 {
				out = append(out, ',')
			}
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			if v == '{' {
				key, _ := tok.(string)
				out = append(canonical.AppendString(out, key), ':')
				if tok, err = dec.Token(); err != nil {
					return nil, err
				}
			}
			if out, err = appendToken(out, dec, tok); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return append(out, end), nil
	case string:
		return canonical.AppendString(out, v), nil
	case json.Number:
		return append(out, v...), nil
	case bool:
		return strconv.AppendBool(out, v), nil
	case nil:
		return append(out, "null"...), nil
	}
	return nil, errText
}

// member is one member of a JSON object, as written.
type member struct {
	key    string
	rawKey []byte
	val    json.RawMessage
}

// objectMembers returns the members of the JSON object b in text order,
// each key and value as written.
func objectMembers(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, cmpErr(err)
	}
	var ms []member
	for dec.More() {
		start := dec.InputOffset()
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		rawKey := bytes.TrimLeft(b[start:dec.InputOffset()], " \t\r\n,")
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key: key, rawKey: rawKey, val: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errText
	}
	return ms, nil
}

// appendObject appends the object of the members ms.
func appendObject(out []byte, ms []member) []byte {
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, m.rawKey...), ':'), m.val...)
	}
	return append(out, '}')
}

// emptyObjectText is the exact agent schema of an object with no
// properties (semantics §15).
const emptyObjectText = `{"type":"object","properties":{},"additionalProperties":false}`

// Reduce returns the schema of an object schema s with the properties
// named in remove deleted, note appended to the description of those
// named in annotate (or set as it, when they have none), and both left
// out of "required" (the keyword goes when nothing is left in it): the
// agent's schema of a procedure whose bound fields the UI fills
// (semantics §15). When no property is left it is exactly
// {"type":"object","properties":{},"additionalProperties":false}. Key
// order, and the text of everything it does not change, is kept. The
// result is checked against the subset under lim.
func Reduce(s *Schema, remove, annotate []string, note string, lim Limits) (*Schema, error) {
	root, err := objectMembers([]byte(s.text))
	if err != nil {
		return nil, &Error{Reason: "the schema is not an object: " + err.Error()}
	}
	props := 0
	for i := range root {
		m := &root[i]
		switch m.key {
		case "properties":
			ps, err := objectMembers(m.val)
			if err != nil {
				return nil, &Error{Path: "/properties", Reason: "not an object of schemas"}
			}
			ps = slices.DeleteFunc(ps, func(p member) bool { return slices.Contains(remove, p.key) })
			for k := range ps {
				if slices.Contains(annotate, ps[k].key) {
					ps[k].val = annotated(ps[k].val, note)
				}
			}
			props = len(ps)
			m.val = appendObject(nil, ps)
		case "required":
			var names []string
			if err := json.Unmarshal(m.val, &names); err != nil {
				return nil, &Error{Path: "/required", Reason: "must be an array of strings"}
			}
			names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(remove, n) || slices.Contains(annotate, n) })
			if len(names) == 0 {
				m.val = nil
				continue
			}
			b := []byte{'['}
			for k, n := range names {
				if k > 0 {
					b = append(b, ',')
				}
				b = canonical.AppendString(b, n)
			}
			m.val = append(b, ']')
		}
	}
	root = slices.DeleteFunc(root, func(m member) bool { return m.val == nil })
	text := emptyObjectText
	if props > 0 {
		text, err = compactText(appendObject(nil, root))
		if err != nil {
			return nil, err
		}
	}
	return ParseLimits([]byte(text), lim)
}

// annotated returns the property schema p with note added to its
// description; a property that is not an object is returned as it is.
func annotated(p json.RawMessage, note string) json.RawMessage {
	ms, err := objectMembers(p)
	if err != nil {
		return p
	}
	for i := range ms {
		if ms[i].key != "description" {
			continue
		}
		var desc string
		if json.Unmarshal(ms[i].val, &desc) != nil {
			return p
		}
		if desc != "" {
			note = desc + " " + note
		}
		ms[i].val = canonical.AppendString(nil, note)
		return appendObject(nil, ms)
	}
	ms = append(ms, member{key: "description", rawKey: []byte(`"description"`), val: canonical.AppendString(nil, note)})
	return appendObject(nil, ms)
}
