package herald_test

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestCleanText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in  string
		max       int
		text      string // CleanText
		line      string // CleanLine
		wantClean bool   // IsCleanText(in)
	}{
		{"empty", "", 0, "", "", true},
		{"ascii", "ok", 0, "ok", "ok", true},
		{"utf8", "héllo ✓ \uFFFD", 0, "héllo ✓ \uFFFD", "héllo ✓ \uFFFD", true},
		{"NUL", "a\x00b", 0, "a\uFFFDb", "a\uFFFDb", false},
		{"invalid byte", "a\xffb", 0, "a\uFFFDb", "a\uFFFDb", false},
		{"surrogate half", "a\xed\xa0\x80b", 0, "a\uFFFD\uFFFD\uFFFDb", "a\uFFFD\uFFFD\uFFFDb", false},
		{"truncated rune", "a\xe2\x9c", 0, "a\uFFFD\uFFFD", "a\uFFFD\uFFFD", false},
		{"controls", "a\x01\x1b[31m\x7fz", 0, "a\uFFFD\uFFFD[31m\uFFFDz", "a\uFFFD\uFFFD[31m\uFFFDz", false},
		{"whitespace", "a\tb\r\nc", 0, "a\tb\r\nc", "a b  c", true},
		{"bound on a rune boundary", "ééé", 5, "éé", "éé", true},
		{"replacement that does not fit", "ab\x00", 4, "ab", "ab", false},
		{"bound, clean", "abcdef", 3, "abc", "abc", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.text, herald.CleanText(tt.in, tt.max))
			require.Equal(t, tt.line, herald.CleanLine(tt.in, tt.max))
			require.Equal(t, tt.wantClean, herald.IsCleanText(tt.in))
		})
	}
}

func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"", "ok", "a\x00b", "\xff\xfe", "é\xe2\x9c", "\x1b[0m\r\n\t"} {
		f.Add(s, 0)
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		for _, got := range []string{herald.CleanText(s, max), herald.CleanLine(s, max)} {
			require.True(t, utf8.ValidString(got))
			require.NotContains(t, got, "\x00")
			require.True(t, herald.IsCleanText(got))
			if max > 0 {
				require.LessOrEqual(t, len(got), max)
			}
			if max <= 0 {
				// Unbounded, every character (or invalid byte) survives,
				// cleaned.
				steps := 0
				for i := 0; i < len(s); steps++ {
					_, size := utf8.DecodeRuneInString(s[i:])
					i += size
				}
				require.Equal(t, steps, utf8.RuneCountInString(got))
			}
		}
		if herald.IsCleanText(s) && (max <= 0 || len(s) <= max) {
			require.Equal(t, s, herald.CleanText(s, max))
		}
		require.NotContains(t, herald.CleanLine(s, max), "\n")
	})
}
