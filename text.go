package herald

import (
	"strings"
	"unicode/utf8"
)

// Text that reaches herald from outside — a receiver's answer, a Go error
// text that quotes a certificate or a response line — is cleaned before it
// is stored. PostgreSQL refuses NUL and invalid UTF-8 in a text column
// (SQLSTATE 22021), and one refused row fails the whole transaction it is
// written in, with every other row of that batch.

// replacementChar stands in for what CleanText removes.
const replacementChar = "\uFFFD"

// CleanText returns s as text that every store accepts and every client can
// show: each byte that is not part of valid UTF-8, NUL, DEL and every other
// C0 control character except tab, newline and carriage return become
// U+FFFD. The result is at most maxBytes bytes, cut on a character boundary
// (a replacement that would not fit is left out whole); maxBytes <= 0 means
// no bound.
func CleanText(s string, maxBytes int) string { return cleanText(s, maxBytes, false) }

// CleanLine is CleanText for one-line text (error messages): tab, newline
// and carriage return become a space as well.
func CleanLine(s string, maxBytes int) string { return cleanText(s, maxBytes, true) }

// IsCleanText reports whether CleanText would leave s (unbounded) as it is.
func IsCleanText(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if isStrippedControl(c) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		i += size
	}
	return true
}

// isStrippedControl reports the ASCII control characters CleanText replaces.
func isStrippedControl(c byte) bool {
	return (c < ' ' && c != '\t' && c != '\n' && c != '\r') || c == 0x7f
}

func cleanText(s string, maxBytes int, line bool) string {
	if maxBytes <= 0 {
		maxBytes = int(^uint(0) >> 1)
	}
	if len(s) <= maxBytes && IsCleanText(s) && (!line || !strings.ContainsAny(s, "\t\n\r")) {
		return s // the common case: nothing to do, nothing allocated
	}
	var b strings.Builder
	b.Grow(min(len(s), maxBytes))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+size]
		switch {
		case r == utf8.RuneError && size == 1:
			piece = replacementChar
		case size == 1 && isStrippedControl(s[i]):
			piece = replacementChar
		case line && (r == '\t' || r == '\n' || r == '\r'):
			piece = " "
		}
		if b.Len()+len(piece) > maxBytes {
			break
		}
		b.WriteString(piece)
		i += size
	}
	return b.String()
}
