package herald

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxEventTypePatternLength bounds an event-type pattern, in characters:
// the limit of an event type itself.
const MaxEventTypePatternLength = 256

// EventTypePatternSyntax says what a pattern may hold; errors of
// CheckEventTypePattern end with it.
const EventTypePatternSyntax = "a pattern is 1 to 256 characters: '*' matches any run of characters, dots included, " +
	"'?' exactly one character, and any other printable character except '[', ']' and '\\' matches itself"

// globKind is what one character of an event-type pattern means.
type globKind uint8

const (
	globLiteral  globKind = iota // matches itself
	globStar                     // '*': any run of characters, dots included
	globOne                      // '?': exactly one character
	globReserved                 // '[', ']', '\\': classes and escapes, not implemented
	globInvalid                  // invalid UTF-8, whitespace or a control character
)

// globChar decodes the first character of p and says what it means. It is
// the one definition of the pattern syntax: CheckEventTypePattern accepts
// exactly the patterns made of characters globMatch implements, and
// globMatch never matches a pattern holding any other.
//
// '[', ']' and '\\' are refused rather than taken literally so that
// character classes or escapes can be added later without changing what
// an accepted pattern means. Whitespace and control characters cannot
// occur in an event type, so a pattern holding one could never match.
func globChar(p string) (size int, kind globKind) {
	r, size := utf8.DecodeRuneInString(p)
	switch {
	case r == '*':
		return size, globStar
	case r == '?':
		return size, globOne
	case r == '[' || r == ']' || r == '\\':
		return size, globReserved
	case r == utf8.RuneError && size <= 1, unicode.IsSpace(r), !unicode.IsPrint(r):
		return size, globInvalid
	}
	return size, globLiteral
}

// MatchEventType reports whether typ matches any of patterns; no patterns
// match everything. Patterns are globs where '*' matches any run of
// characters including dots ("bundle.*" matches "bundle.indexed" and
// "bundle.a.b") and '?' one character; see CheckEventTypePattern. A
// pattern CheckEventTypePattern refuses matches nothing.
func MatchEventType(patterns []string, typ string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if globMatch(p, typ) {
			return true
		}
	}
	return false
}

// CheckEventTypePattern returns nil when p is a pattern MatchEventType
// implements, or an error that says what is wrong and ends with
// EventTypePatternSyntax.
func CheckEventTypePattern(p string) error {
	if p == "" {
		return fmt.Errorf("is empty; %s", EventTypePatternSyntax)
	}
	n := 0
	for i := 0; i < len(p); n++ {
		size, kind := globChar(p[i:])
		switch kind {
		case globReserved:
			return fmt.Errorf("holds %q at character %d: character classes and escapes are not supported; %s",
				p[i:i+size], n+1, EventTypePatternSyntax)
		case globInvalid:
			return fmt.Errorf("holds whitespace, a control character or invalid UTF-8 at character %d; %s",
				n+1, EventTypePatternSyntax)
		}
		i += size
	}
	if n > MaxEventTypePatternLength {
		return fmt.Errorf("is %d characters long; %s", n, EventTypePatternSyntax)
	}
	return nil
}

// globMatch is an iterative matcher with one backtrack point, the last
// '*': O(len(p)·len(s)) at worst. It works on characters, so '?' matches
// one character however many bytes it takes.
func globMatch(p, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0 // position after the last '*', and where it resumes in s
	for sx < len(s) {
		if px < len(p) {
			size, kind := globChar(p[px:])
			switch kind {
			case globStar:
				px += size
				starP, starS = px, sx
				continue
			case globOne:
				_, n := utf8.DecodeRuneInString(s[sx:])
				px, sx = px+size, sx+n
				continue
			case globLiteral:
				if len(s)-sx >= size && s[sx:sx+size] == p[px:px+size] {
					px, sx = px+size, sx+size
					continue
				}
			default:
				return false // not a pattern: matches nothing
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last '*' take one more character and retry after it.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		px, sx = starP, starS
	}
	for px < len(p) {
		size, kind := globChar(p[px:])
		if kind != globStar {
			return false
		}
		px += size
	}
	return true
}

// EventTypeLike returns a pattern CheckEventTypePattern accepts as an SQL
// LIKE pattern with the escape character '\\', for stores that search
// events by type: '*' becomes '%', '?' becomes '_', and a literal '%' or
// '_' is escaped. literal is true when p has no wildcard, so a store can
// compare with '=' and keep its index. The LIKE must be case-sensitive,
// as MatchEventType is (PostgreSQL's is; SQLite's is not, so SQLite takes
// p unchanged with GLOB, which means the same for every accepted pattern:
// '[', ']' and '\\' are refused). The conformance suite holds both to
// MatchEventType's meaning.
func EventTypeLike(p string) (like string, literal bool) {
	var b strings.Builder
	literal = true
	for i := 0; i < len(p); {
		size, kind := globChar(p[i:])
		switch {
		case kind == globStar:
			b.WriteByte('%')
			literal = false
		case kind == globOne:
			b.WriteByte('_')
			literal = false
		case p[i] == '%' || p[i] == '_':
			b.WriteByte('\\')
			b.WriteByte(p[i])
		default:
			b.WriteString(p[i : i+size])
		}
		i += size
	}
	return b.String(), literal
}
