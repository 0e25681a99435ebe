package filter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// ReadsBody is conservative: any expression that can reach the body (by
// name, or through the current node taken whole) reads it.
func TestMappingReadsBody(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]bool{
		"body.type":                      true,
		"body":                           true,
		"@":                              true,
		"*":                              true,
		"[0]":                            true,
		"keys(@)":                        true,
		"headers.*":                      true, // conservative: a projection
		"headers[?x]":                    true,
		"headers | @":                    true,
		"headers.body":                   true, // conservative: the name
		"{a: body.x}":                    true,
		"[headers.a, body.b]":            true,
		"join('-', [subject, body.x])":   true,
		"headers.type":                   false,
		"subject":                        false,
		"message_id || headers.id":       false,
		"to_string(timestamp)":           false,
		"join('-', [subject, 'x'])":      false,
		"headers.\"kind\" == 'a' && `1`": false,
		"{body: headers.x}":              false, // body is the hash's key, not a field read
	} {
		m, err := CompileMapping(&herald.SourceMapping{Type: expr})
		require.NoError(t, err, expr)
		require.Equal(t, want, m.ReadsBody(), expr)
	}
	m, err := CompileMapping(&herald.SourceMapping{Type: "subject", Data: "headers"})
	require.NoError(t, err)
	require.False(t, m.ReadsBody())
	m, err = CompileMapping(&herald.SourceMapping{Type: "subject", ID: "body.id"})
	require.NoError(t, err)
	require.True(t, m.ReadsBody(), "any field's expression counts")
	m, err = CompileMapping(nil)
	require.NoError(t, err)
	require.False(t, m.ReadsBody())
}
