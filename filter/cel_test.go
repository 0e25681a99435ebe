package filter

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestCELMatch(t *testing.T) {
	t.Parallel()

	noKey := NewInput(&herald.Event{ID: "e", Type: "t", Data: []byte(`{"x": 1}`)})
	tests := []struct {
		expr string
		want bool
		in   *Input // nil: the test event
	}{
		// Variables.
		{expr: `type == "bundle.indexed"`, want: true},
		{expr: `type.startsWith("bundle.")`, want: true},
		{expr: `key == "bundle-1"`, want: true},
		{expr: `version == 7 && has_version`, want: true},
		{expr: `version > 6`, want: true},
		{expr: `key == "" && version == 0 && !has_version`, want: true, in: noKey},
		{expr: `event.id == "evt_1" && event.data.size == 15`, want: true},
		{expr: `event.timestamp == "2024-05-01T12:00:00Z"`, want: true},
		{expr: `!has(event.key)`, want: true, in: noKey},
		// Numbers: ints stay ints, mixed comparisons work.
		{expr: `data.size == 15`, want: true},
		{expr: `data.size % 2 == 1`, want: true},
		{expr: `data.size > 10.5`, want: true},
		{expr: `data.ratio == 0.5`, want: true},
		{expr: `data.ratio < 1`, want: true},
		{expr: `data.files[1].size == 9007199254740993`, want: true},
		{expr: `data.files[1].size == 9007199254740992`, want: false},
		// Strings, lists, maps, macros, ext.Strings.
		{expr: `data.sample.donor.species == "Homo sapiens"`, want: true},
		{expr: `data.sample.organ.lowerAscii() == "brain"`, want: true},
		{expr: `"blue" in data.tags`, want: true},
		{expr: `"red" in data.tags`, want: false},
		{expr: `data.files.exists(f, f.name.endsWith(".json"))`, want: true},
		{expr: `data.files.all(f, f.indexed)`, want: false},
		{expr: `size(data.files) == 2`, want: true},
		{expr: `data.files.map(f, f.size).exists(s, s > 1000000)`, want: true},
		{expr: `has(data.bundle.uuid)`, want: true},
		{expr: `has(data.bundle.missing)`, want: false},
		{expr: `data.active == true`, want: true},
		{expr: `data.nothing == null`, want: true},
		{expr: `data.created.matches("^2024-")`, want: true},
		{expr: `data["a.b"] == "dotted"`, want: true},
		{expr: `true`, want: true},
		{expr: `false`, want: false},
		// Evaluation errors are "no match", in either polarity.
		{expr: `data.missing == 1`, want: false},
		{expr: `!(data.missing == 1)`, want: false},
		{expr: `data.sample.organ > 1`, want: false},
		{expr: `data.files[5].name == "x"`, want: false},
		{expr: `data.size / 0 == 1`, want: false},
		{expr: `int(data.sample.organ) == 1`, want: false},
		{expr: `data.x == 1`, want: false, in: NewInput(&herald.Event{Type: "t", Data: []byte(`[1,2]`)})},
		{expr: `data == null`, want: true, in: NewInput(&herald.Event{Type: "t"})},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{CEL: tt.expr})
			require.NoError(t, err)
			in := tt.in
			if in == nil {
				in = testInput(t)
			}
			require.Equal(t, tt.want, m.Match(in))
		})
	}
}

func TestCELCompileErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		expr string
		msg  string
	}{
		{"Syntax", `type ==`, "syntax error"},
		{"Undeclared", `foo == 1`, "undeclared reference to 'foo'"},
		{"NotBoolDyn", `data.active`, "must evaluate to bool, not dyn"},
		{"NotBoolString", `type`, "must evaluate to bool, not string"},
		{"NotBoolInt", `version + 1`, "must evaluate to bool, not int"},
		{"TypeMismatch", `type == 1`, "no matching overload"},
		{"TooLong", `type == "` + strings.Repeat("a", MaxCELLength) + `"`, "the limit is 4096"},
		{"InvalidUTF8", "type == \"\xff\"", "not valid UTF-8"},
		{"TooDeep", strings.Repeat("(", 100) + "true" + strings.Repeat(")", 100), "recursion"},
		{"BadRegex", `type.matches("(")`, "missing closing )"},
		{"Position", "type == 1 &&\n  foo", "line 2, column 3: undeclared reference to 'foo'"},
		{"ManyErrorsShort", strings.Repeat("\x17", 4000), "line 1, column 1: syntax error: a control character (U+0017) cannot appear"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{CEL: tt.expr})
			require.Nil(t, m)
			requireFilterError(t, err, "filter.cel", tt.msg)
			require.Less(t, len(err.Error()), 1000)
		})
	}
}

// TestCELSyntaxErrorsInWords: syntax errors say where (line and column)
// and what is wrong in words, not in the parser's grammar tokens (issue 24:
// "mismatched input '<EOF>' expecting {'[', '{', …}").
func TestCELSyntaxErrorsInWords(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		expr string
		msg  string
	}{
		{"EndsEarly", `type ==`, "line 1, column 8: syntax error: the expression ends too early; expected a value (a field such as data.amount, a literal, or an expression in parentheses)"},
		{"EndsEarlySecondLine", "type == \"a\" &&\n", "line 2, column 1: syntax error: the expression ends too early; expected a value"},
		{"UnclosedParen", `(type == "a"`, "line 1, column 13: syntax error: ')' is missing before the end of the expression"},
		{"ExtraParen", `type == "a")`, "line 1, column 12: syntax error: ')' follows a complete expression (join conditions with && or ||, compare with ==)"},
		{"WordAnd", `type == "a" and true`, "line 1, column 13: syntax error: 'and' follows a complete expression"},
		{"SingleEquals", `type = "a"`, "line 1, column 6: syntax error: '=' is not an operator; compare with =="},
		{"UnclosedString", `type == 'a`, "line 1, column 9: syntax error: a string is not closed: ' has no matching '"},
		{"UnclosedList", `data.x in [1,2`, "line 1, column 15: syntax error: the expression ends too early; expected ']' or ','"},
		{"BadCharacter", `@x`, "line 1, column 1: syntax error: '@' cannot appear in an expression"},
		{"TrailingDot", `data.`, "line 1, column 6: syntax error: the expression cannot continue with '.'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{CEL: tt.expr})
			require.Nil(t, m)
			requireFilterError(t, err, "filter.cel", tt.msg)
			for _, raw := range []string{"mismatched input", "extraneous input", "<EOF>", "IDENTIFIER", "token recognition", "no viable alternative"} {
				require.NotContains(t, err.Error(), raw)
			}
		})
	}
}

// TestCELCostLimit: an expression whose work grows with the data stops at
// the cost limit, quickly, as "no match".
func TestCELCostLimit(t *testing.T) {
	t.Parallel()

	var b strings.Builder
	b.WriteString(`{"l": [`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"abcdefghij"`)
	}
	b.WriteString(`]}`)
	in := NewInput(&herald.Event{Type: "t", Data: []byte(b.String())})

	m, err := Compile(&herald.Filter{CEL: `data.l.all(a, data.l.all(b, data.l.exists(c, a + b + c == "x") || true))`})
	require.NoError(t, err)
	before := CostLimitHits()["cel"]
	start := time.Now()
	require.False(t, m.Match(in))
	elapsed := time.Since(start)
	require.Greater(t, CostLimitHits()["cel"], before, "counted")
	t.Logf("cost-limited evaluation stopped after %s", elapsed)
	require.Less(t, elapsed, time.Second)

	// A cheap expression on the same data still matches.
	m, err = Compile(&herald.Filter{CEL: `size(data.l) == 1000`})
	require.NoError(t, err)
	require.True(t, m.Match(in))
}

// TestCELStringGrowth: string functions that multiply their input (replace,
// join of split) are charged by size, so a chain of them stops at the cost
// limit instead of building a string exponential in the chain's length.
func TestCELStringGrowth(t *testing.T) {
	t.Parallel()

	for _, expr := range []string{
		`type` + strings.Repeat(`.replace("", type)`, 12) + `.size() > 0`,
		strings.Repeat(`"aaaaaaaaaa".replace("a", `, 10) + `"aaaaaaaaaa"` + strings.Repeat(`)`, 10) + `.size() > 0`,
		`type.split("").join(type).split("").join(type).split("").join(type).split("").join(type).size() > 0`,
	} {
		m, err := Compile(&herald.Filter{CEL: expr})
		require.NoError(t, err)
		before := CostLimitHits()["cel"]
		require.False(t, m.Match(testInput(t)), expr)
		require.Greater(t, CostLimitHits()["cel"], before, expr)
	}
}
