package herald

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCheckEventTypePattern(t *testing.T) {
	t.Parallel()

	tests := []struct {
		pattern string
		msg     string // "" when accepted
	}{
		{"order.created", ""},
		{"order.*", ""},
		{"*", ""},
		{"**", ""},
		{"order.?", ""},
		{"*.created", ""},
		{"bundle.*.done", ""},
		{"commande.créée", ""},
		{"顧客.*", ""},
		{"a(b)|c+{d}^$", ""}, // no meaning here: literal
		{strings.Repeat("é", MaxEventTypePatternLength), ""},
		{"", "is empty"},
		{"order.[ab]*", `holds "[" at character 7: character classes and escapes are not supported`},
		{"order.a]", `holds "]" at character 8`},
		{`order.\*`, `holds "\\" at character 7`},
		{"order created", "whitespace, a control character or invalid UTF-8 at character 6"},
		{"order.\tcreated", "at character 7"},
		{"order.\x00", "at character 7"},
		{"order.\xff", "invalid UTF-8 at character 7"},
		{"order.\u00a0x", "at character 7"}, // no-break space
		{strings.Repeat("é", MaxEventTypePatternLength+1), "is 257 characters long"},
	}
	for _, tt := range tests {
		err := CheckEventTypePattern(tt.pattern)
		if tt.msg == "" {
			require.NoError(t, err, "%q", tt.pattern)
			continue
		}
		require.Error(t, err, "%q", tt.pattern)
		require.Contains(t, err.Error(), tt.msg)
		require.True(t, strings.HasSuffix(err.Error(), EventTypePatternSyntax), "the message lists what is supported")
	}
}

func TestMatchEventType(t *testing.T) {
	t.Parallel()

	tests := []struct {
		pattern, typ string
		want         bool
	}{
		{"order.created", "order.created", true},
		{"order.created", "order.created2", false},
		{"order.created", "order.create", false},
		{"order.*", "order.created", true},
		{"order.*", "order.a.b", true}, // '*' crosses dots
		{"order.*", "order.", true},
		{"order.*", "order", false},
		{"*.created", "order.created", true},
		{"*", "x", true},
		{"o*r*d", "oxxrxxd", true},
		{"o*r*d", "oxxrxx", false},
		{"a*b*c", "abbbbc", true},
		{"order.?", "order.a", true},
		{"order.?", "order.ab", false},
		{"order.?", "order.é", true}, // one character, two bytes
		{"order.??", "order.é", false},
		{"?é?", "xéy", true},
		{"*é", "ééé", true},
		{"order.[ab]*", "order.a", false},
		{"order.[ab]*", "order.[ab]x", false}, // refused patterns match nothing
		{`order.\*`, `order.\*`, false},
		{`*\`, `x\`, false},
		{"a b", "a b", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, MatchEventType([]string{tt.pattern}, tt.typ), "%q ~ %q", tt.pattern, tt.typ)
	}
	require.True(t, MatchEventType(nil, "anything"))
	require.True(t, MatchEventType([]string{"a.*", "b.*"}, "b.x"))
	require.False(t, MatchEventType([]string{"a.*", "b.*"}, "c.x"))
}

// FuzzEventTypePattern: a pattern CheckEventTypePattern accepts behaves in
// MatchEventType as its documented meaning (the regular expression with '*'
// as .* and '?' as one character); a pattern it refuses for a character
// matches nothing.
//
//	go test -run='^$' -fuzz=FuzzEventTypePattern -fuzztime=30s .
func FuzzEventTypePattern(f *testing.F) {
	for _, s := range [][2]string{
		{"order.*", "order.created"},
		{"order.[ab]*", "order.a"},
		{"order.?", "order.é"},
		{"*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaa"},
		{`order.\*`, `order.\*`},
		{"*.x?", "a.b.xy"},
		{"é?*", "éé"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, typ string) {
		got := MatchEventType([]string{p}, typ)
		if err := CheckEventTypePattern(p); err != nil {
			// Empty and overlong patterns are refused for their size,
			// not their syntax; the matcher implements them.
			sizeOK := p != "" && utf8.RuneCountInString(p) <= MaxEventTypePatternLength
			if got && sizeOK {
				t.Fatalf("refused pattern %q (%v) matched %q", p, err, typ)
			}
			return
		}
		if !strings.ContainsAny(p, "*?") {
			if got != (p == typ) {
				t.Fatalf("literal pattern %q ~ %q = %v", p, typ, got)
			}
		}
		if !MatchEventType([]string{p}, strings.NewReplacer("*", "", "?", "x").Replace(p)) ||
			!MatchEventType([]string{p}, strings.NewReplacer("*", typ, "?", "é").Replace(p)) {
			t.Fatalf("pattern %q does not match its own expansions", p)
		}
		if !utf8.ValidString(typ) {
			return // regexp reads invalid bytes as U+FFFD
		}
		var re strings.Builder
		re.WriteString(`(?s)\A`)
		for _, r := range p {
			switch r {
			case '*':
				re.WriteString(".*")
			case '?':
				re.WriteString(".")
			default:
				re.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		re.WriteString(`\z`)
		if want := regexp.MustCompile(re.String()).MatchString(typ); got != want {
			t.Fatalf("%q ~ %q = %v, want %v", p, typ, got, want)
		}
	})
}
