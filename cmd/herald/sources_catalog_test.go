package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/eventtype"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/source"
	"github.com/heraldhq/herald/store"
)

// TestSourceEventTypeValidate: a source's message whose data does not
// conform to its type's schema (validate on) is rejected with reason
// schema_mismatch and the path, as POST /v1/events would refuse it;
// conforming messages and other types pass.
func TestSourceEventTypeValidate(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	now := time.Now().UTC()
	_, err := s.EventTypeCreate(t.Context(), &store.EventTypeCreateParams{EventType: &herald.EventType{
		Name: "order.placed", Schema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`),
		Validate: true, CreatedAt: now, UpdatedAt: now}})
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	conv, err := source.NewConverter(&herald.Source{Name: "orders", Type: herald.DestinationAMQP},
		catalogDecode(eventtype.NewCatalog(s, 0, logger), logger), 0)
	require.NoError(t, err)

	_, rj := conv.Convert(&source.Message{Body: []byte(`{"amount":"12"}`), Route: "order.placed", MessageID: "m1"})
	require.NotNil(t, rj)
	require.Equal(t, herald.RejectSchema, rj.Reason)
	require.Contains(t, rj.Message, "data.amount: got string, want number")

	ev, rj := conv.Convert(&source.Message{Body: []byte(`{"amount":12}`), Route: "order.placed", MessageID: "m2"})
	require.Nil(t, rj)
	require.Equal(t, "m2", ev.ID)
	_, rj = conv.Convert(&source.Message{Body: []byte(`{"amount":"12"}`), Route: "other.type", MessageID: "m3"})
	require.Nil(t, rj)
}
