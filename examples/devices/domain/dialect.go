package domain

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// dialect is the SQL dialect of a Store's database. Every operation has one
// query text, written for SQLite with a few markers; [dialect.sql] turns it
// into the dialect's text:
//
//	?             a parameter: $1, $2, … on PostgreSQL
//	{forUpdate}   lock the rows read until the transaction ends: FOR UPDATE on
//	              PostgreSQL; nothing on SQLite, whose transactions take the
//	              write lock up front (BEGIN IMMEDIATE)
//	{skipLocked}  the same, skipping rows another transaction holds
//	{serial}      an autoincrement primary key column type
//	{text}        a text column compared and sorted byte by byte: COLLATE "C"
//	              on PostgreSQL, whatever the database's default collation,
//	              as SQLite's BINARY is
//
// Case-insensitive matching folds ASCII letters only, the same on both
// backends: lower() of a column on SQLite (ASCII only without ICU) and of
// a COLLATE "C" column on PostgreSQL (ASCII only in the C locale), against
// arguments folded in Go by [foldASCII].
type dialect uint8

const (
	dialectSQLite dialect = iota
	dialectPostgres
)

// String returns the backend's name.
func (d dialect) String() string {
	if d == dialectPostgres {
		return "postgres"
	}
	return "sqlite"
}

var (
	sqliteMarkers   = strings.NewReplacer("{forUpdate}", "", "{skipLocked}", "", "{serial}", "INTEGER PRIMARY KEY AUTOINCREMENT", "{text}", "TEXT")
	postgresMarkers = strings.NewReplacer("{forUpdate}", " FOR UPDATE", "{skipLocked}", " FOR UPDATE SKIP LOCKED",
		"{serial}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "{text}", `TEXT COLLATE "C"`)
)

// sql returns query in dialect d.
func (d dialect) sql(query string) string {
	if d == dialectPostgres {
		return rebind(postgresMarkers.Replace(query))
	}
	return sqliteMarkers.Replace(query)
}

// rebind numbers the '?' placeholders of query outside string literals:
// $1, $2, …
func rebind(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 8)
	n, quoted := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'':
			quoted = !quoted // '' inside a literal toggles twice
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// placeholders returns n comma-separated '?'.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// foldASCII lowers the ASCII letters of s and nothing else, as lower() does
// on both backends' folded columns.
func foldASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// storable reports whether both backends store s as it is: valid UTF-8
// without NUL (PostgreSQL text refuses both).
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
