package filter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestJMESPathMatch(t *testing.T) {
	t.Parallel()

	tests := []struct {
		expr string
		want bool
	}{
		// Truthiness of the result.
		{"data.size", true},                  // number
		{"data.ratio", true},                 // number
		{"`0`", true},                        // zero is a number, so true
		{"data.active", true},                // true
		{"`false`", false},                   // false
		{"data.nothing", false},              // null
		{"data.missing", false},              // missing is null
		{"data.empty", false},                // ""
		{"data.empty_list", false},           // []
		{"data.empty_obj", false},            // {}
		{"data.tags", true},                  // non-empty array
		{"data.bundle", true},                // non-empty object
		{"data.sample.organ", true},          // non-empty string
		{"data.files[?size > `2000`]", true}, // filter projection
		{"data.files[?size > `1e20`]", false},
		// Comparisons and functions on the envelope.
		{"type == 'bundle.indexed'", true},
		{"type == 'other'", false},
		{"key == 'bundle-1' && version == `7`", true},
		{"version > `6`", true},
		{"id == 'evt_1'", true},
		{"starts_with(type, 'bundle.')", true},
		{"contains(data.tags, 'green')", true},
		{"contains(data.tags, 'red')", false},
		{"length(data.files) == `2`", true},
		{"data.files[0].indexed", true},
		{"data.files[1].indexed", false},
		{"data.sample.donor.species == 'Homo sapiens'", true},
		{"data.\"a.b\" == 'dotted'", true},
		{"data.matrix[][] | contains(@, `4`)", true},
		// Evaluation errors mean no match, in either polarity.
		{"abs(type)", false},
		{"!abs(type)", false},
		{"length(data.size)", false},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{JMESPath: tt.expr})
			require.NoError(t, err)
			require.Equal(t, tt.want, m.Match(testInput(t)))
		})
	}
}

func TestJMESPathTruthy(t *testing.T) {
	t.Parallel()

	tests := []struct {
		v    any
		want bool
	}{
		{nil, false},
		{false, false},
		{true, true},
		{"", false},
		{"x", true},
		{[]any{}, false},
		{[]any{nil}, true},
		{map[string]any{}, false},
		{map[string]any{"a": nil}, true},
		{0.0, true},
		{-1.5, true},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, jmesTruthy(tt.v), "%#v", tt.v)
	}
}

func TestJMESPathCompileErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		expr string
		msg  string
	}{
		{"Unclosed", "data.files[", "syntax error"},
		{"TrailingDot", "data.", "at offset 5"},
		{"BadLiteral", "`{`", "syntax error: unexpected end of JSON input"},
		{"TooLong", strings.Repeat("a.", MaxJMESPathLength), "the limit is 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{JMESPath: tt.expr})
			require.Nil(t, m)
			requireFilterError(t, err, "filter.jmespath", tt.msg)
		})
	}
}
