package herald

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckEventType: a catalog entry is one exact, publishable type with
// bounded description, schema and example.
func TestCheckEventType(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"order.placed", "a", "billing/invoice.paid", "é." + strings.Repeat("x", MaxEventTypeLen-2)} {
		require.NoError(t, CheckEventTypeName(name), name)
	}
	for _, name := range []string{"", "order.*", "order.?", "order.[a]", `order\.x`, "order placed", "a\x00", "herald.delivery.dead",
		strings.Repeat("x", MaxEventTypeLen+1), "\xff"} {
		var he *Error
		require.True(t, errors.As(CheckEventTypeName(name), &he), "%q", name)
		require.Equal(t, "name", he.Field)
	}
	field := func(et *EventType) string {
		var he *Error
		if !errors.As(CheckEventType(et), &he) {
			return ""
		}
		return he.Field
	}
	ok := EventType{Name: "a", Description: "line\nline\ttab", Schema: json.RawMessage(`true`), Example: json.RawMessage(`1`), Validate: true}
	require.Empty(t, field(&ok))
	for want, et := range map[string]EventType{
		"description": {Name: "a", Description: strings.Repeat("d", MaxEventTypeDescription+1)},
		"schema":      {Name: "a", Schema: json.RawMessage(`"a string"`)},
		"example":     {Name: "a", Example: json.RawMessage(`{`)},
		"validate":    {Name: "a", Validate: true},
	} {
		require.Equal(t, want, field(&et))
	}
	big := EventType{Name: "a", Schema: json.RawMessage(`{"description":"` + strings.Repeat("x", MaxEventTypeSchema) + `"}`)}
	require.Equal(t, "schema", field(&big))
	ctl := EventType{Name: "a", Description: "bell\a"}
	require.Equal(t, "description", field(&ctl))
}
