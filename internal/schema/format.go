package schema

import "strings"

// checkFormat reports whether s is valid in format f. The checks are
// hand-written equivalents of the reference's regular expressions (see
// the package documentation); they do not allocate.
func checkFormat(f format, s string) bool {
	switch f {
	case fmtDateTime:
		return isDateTime(s)
	case fmtDate:
		return isDateShape(s)
	case fmtUUID:
		return isUUID(s)
	case fmtEmail:
		return isEmail(s)
	case fmtURI:
		return isURI(s)
	}
	return true
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digits parses s[i:i+n] as a decimal number of exactly n ASCII digits.
func digits(s string, i, n int) (int, bool) {
	if i+n > len(s) {
		return 0, false
	}
	x := 0
	for _, c := range []byte(s[i : i+n]) {
		if !isDigit(c) {
			return 0, false
		}
		x = x*10 + int(c-'0')
	}
	return x, true
}

// isDateShape matches ^\d{4}-\d{2}-\d{2}$.
func isDateShape(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	_, ok1 := digits(s, 0, 4)
	_, ok2 := digits(s, 5, 2)
	_, ok3 := digits(s, 8, 2)
	return ok1 && ok2 && ok3
}

// daysIn returns the number of days of month m (1–12) in year y of the
// proleptic Gregorian calendar.
func daysIn(m, y int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// isDateTime matches
// ^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$
// and additionally requires the fields to be in range as RFC 3339 and Go's
// time.Time JSON decoding require (month 1–12, a day of that month, hour
// 0–23, minute and second 0–59, zone offset hour 0–23 and minute 0–59), so
// a value that passes always decodes into a time.Time.
func isDateTime(s string) bool {
	if len(s) < 20 || !isDateShape(s[:10]) || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return false
	}
	year, _ := digits(s, 0, 4)
	month, _ := digits(s, 5, 2)
	day, _ := digits(s, 8, 2)
	hour, ok1 := digits(s, 11, 2)
	minute, ok2 := digits(s, 14, 2)
	sec, ok3 := digits(s, 17, 2)
	if !ok1 || !ok2 || !ok3 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return false
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	rest := s[i:]
	if rest == "Z" {
		return true
	}
	if len(rest) != 6 || (rest[0] != '+' && rest[0] != '-') || rest[3] != ':' {
		return false
	}
	oh, ok1 := digits(rest, 1, 2)
	om, ok2 := digits(rest, 4, 2)
	return ok1 && ok2 && oh <= 23 && om <= 59
}

// isHex reports whether c is an ASCII hexadecimal digit.
func isHex(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// isUUID matches 8-4-4-4-12 hexadecimal digits (either case).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

// isJSSpace reports whether r is matched by \s in a JavaScript regular
// expression.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return 0x2000 <= r && r <= 0x200a
}

// isEmail matches ^[^\s@]+@[^\s@]+\.[^\s@]+$: no whitespace, exactly one
// "@" with something before it, and after it a "." that is neither first
// nor last.
func isEmail(s string) bool {
	at := -1
	for i, r := range s {
		if r == '@' {
			if at >= 0 {
				return false
			}
			at = i
		} else if isJSSpace(r) {
			return false
		}
	}
	if at < 1 {
		return false
	}
	domain := s[at+1:]
	if len(domain) < 3 {
		return false
	}
	return strings.IndexByte(domain[1:len(domain)-1], '.') >= 0
}

// isURI matches ^[a-zA-Z][a-zA-Z0-9+.-]*: (a scheme and a colon).
func isURI(s string) bool {
	if len(s) < 2 || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			return true
		case isAlpha(c) || isDigit(c) || c == '+' || c == '.' || c == '-':
		default:
			return false
		}
	}
	return false
}

// isAlpha reports whether c is an ASCII letter.
func isAlpha(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }
