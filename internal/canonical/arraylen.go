package canonical

// ArrayLens looks at the members of the JSON object text and, for each
// member whose key is keys[i] and whose value is an array, sets lens[i] to
// that array's number of elements; other entries of lens are left as they
// are. keys are compared with the key text between the quotes as it
// appears in text (in canonical JSON, the form AppendString writes).
//
// It exists to size slices before a decoder fills them, so it informs and
// never fails: it reads one pass, tolerates whitespace, does not recurse,
// and stops at the first thing that is not a well-formed object member
// (leaving what it had not reached unset). len(lens) must be at least
// len(keys).
func ArrayLens(text []byte, keys []string, lens []int) {
	i := skipSpace(text, 0)
	if i >= len(text) || text[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(text, i)
		if i >= len(text) || text[i] != '"' {
			return
		}
		end := skipString(text, i)
		if end > len(text) {
			return
		}
		key := text[i+1 : end-1]
		i = skipSpace(text, end)
		if i >= len(text) || text[i] != ':' {
			return
		}
		i = skipSpace(text, i+1)
		if i >= len(text) {
			return
		}
		k := -1
		if text[i] == '[' {
			for j, want := range keys {
				if string(key) == want {
					k = j
					break
				}
			}
		}
		n := 0
		i, n = skipValue(text, i)
		if i > len(text) {
			return
		}
		if k >= 0 {
			lens[k] = n
		}
		i = skipSpace(text, i)
		if i >= len(text) || text[i] != ',' {
			return
		}
		i++
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(text []byte, i int) int {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at
// text[i] == '"', or len(text)+1 if it does not end.
func skipString(text []byte, i int) int {
	for i++; i < len(text); i++ {
		switch text[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(text) + 1
}

// skipValue returns the index just past the value that starts at text[i]
// (len(text)+1 if it does not end) and, when the value is an array, its
// number of elements. Containers are skipped by counting brackets, with
// strings stepped over; a scalar ends at the next delimiter.
func skipValue(text []byte, i int) (int, int) {
	switch text[i] {
	case '"':
		return skipString(text, i), 0
	case '[', '{':
	default:
		for i < len(text) {
			switch text[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, 0
			}
			i++
		}
		return i, 0
	}
	array := text[i] == '['
	n, depth := 0, 0
	if j := skipSpace(text, i+1); array && j < len(text) && text[j] != ']' {
		n = 1
	}
	for ; i < len(text); i++ {
		switch text[i] {
		case '"':
			i = skipString(text, i) - 1
		case '[', '{':
			depth++
		case ']', '}':
			if depth--; depth == 0 {
				if !array {
					n = 0
				}
				return i + 1, n
			}
		case ',':
			if depth == 1 {
				n++
			}
		}
	}
	return len(text) + 1, 0
}
